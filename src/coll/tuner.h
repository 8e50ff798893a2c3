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
// broadcast, one block for the others) on `nranks` ranks. `slow_links`: every rank's links
// are of known speed up to 10 Gbit/s (World::slow_links(), the same on every rank), where the
// built-in choices were measured in the virtual pod lab; otherwise on loopback.
// `oversubscribed`: every rank on one host with more ranks than CPUs (World::oversubscribed()).
// `over_shm`: every peer is reached through the shared-memory transport (both ranks of a pair
// pick the transport from the same two addresses and settings, so they agree).
std::string_view choose_algorithm(Collective c, size_t bytes, int nranks, bool slow_links = false,
                                  bool oversubscribed = false, bool over_shm = false);
// The largest call (in slot bytes, as algo::arena_bytes() counts them) for which the built-in
// table prefers the shared-memory arena ("shm") over the transport-based algorithms, when a
// communicator has one. Measured with `podnet bench coll -a shm` against the others
// (docs/collectives.md); PODNET_SHM_COLL_MAX caps it. `cma_cheap`: on this host one
// cross-memory copy costs less than a hand-over through the arena (Arena::cma_cheap()).
// `split`: cross-memory attach, and the host has a CPU per rank, so that the transport's
// large sends can be copied by both sides at once (PODNET_SHM_SPLIT_MIN, docs/shm.md).
size_t arena_crossover(Collective c, int nranks, bool cma = false, bool cma_cheap = false, bool split = false);
// Whether, past the arena's crossover, direct cross-memory reads (algorithm "cma") beat the
// transport's algorithms for collective c, when every rank may read every other one.
bool cma_beyond_arena(Collective c, int nranks = 2, bool cma_cheap = false);
// The call size (in slot bytes) from which the arena, in slot-sized parts, beats the direct
// transfers again (`cma`: every rank may reach every other one's memory), or the
// transport's algorithms without them; SIZE_MAX: never.
size_t arena_parts_from(Collective c, int nranks, bool cma);
// The static string of algorithm `name` of `c` (one of algorithms_for(c)); empty if none.
std::string_view canonical_name(Collective c, std::string_view name);
// Checks an override; the error lists the valid names.
Status validate_algorithm(Collective c, std::string_view name);

// A measured table (`podnet tune`): for each collective, the fastest algorithm up to each
// size (bytes as choose_algorithm() sees them). Used instead of the built-in rules when it
// was measured with the same number of ranks.
struct TuneEntry {
  Collective coll;
  uint64_t max_bytes;
  std::string algorithm;
};
struct TuneTable {
  int nranks = 0;
  std::vector<TuneEntry> entries;  // per collective, by increasing max_bytes
};
Result<TuneTable> parse_tune_table(std::string_view json);
std::string format_tune_table(const TuneTable& t);
// Loads PODNET_TUNER_FILE once per process; an unreadable or malformed file is logged and
// ignored (the built-in table is used).
const TuneTable* loaded_tune_table();

}  // namespace podnet::detail
