// Algorithm selection: a table of (collective, world size, message size) -> algorithm,
// overridable per collective with PODNET_ALGO_<COLLECTIVE>=name.
#pragma once

#include <podnet/coll.h>

#include <string>
#include <string_view>
#include <vector>

namespace podnet::detail {

// Names of the algorithms a collective has, the first being the fallback.
const std::vector<std::string_view>& algorithms_for(Collective c);
// The default choice for `bytes` of payload per rank (the whole vector for allreduce and
// broadcast, one block for the others) on `nranks` ranks.
std::string_view choose_algorithm(Collective c, size_t bytes, int nranks);
// Checks an override; the error lists the valid names.
Status validate_algorithm(Collective c, std::string_view name);

}  // namespace podnet::detail
