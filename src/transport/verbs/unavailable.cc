// Linked instead of the verbs transport when podnet was built without libibverbs.
#include "transport/verbs/verbs.h"

namespace podnet::verbs {

Result<std::unique_ptr<detail::Transport>> create_verbs_transport(detail::ProgressEngine&, detail::MemoryRegistry&,
                                                                  uint64_t, int, const VerbsOptions&) {
  return Status::Unavailable(
      "podnet was built without libibverbs/librdmacm (Debian: libibverbs-dev librdmacm-dev; re-run cmake)");
}

}  // namespace podnet::verbs
