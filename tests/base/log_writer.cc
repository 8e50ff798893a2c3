// Helper for log_test: a fresh process (logging reads PODNET_LOG* once per process) that
// writes one line per level, each from another subsystem. With "set-rank" it then changes
// its rank and writes once more.
#include <string_view>

#include "base/log.h"

int main(int argc, char** argv) {
  const std::string_view mode = argc > 1 ? argv[1] : "";
  PODNET_ERROR(kNet, "error line {}", 1);
  PODNET_WARN(kBase, "warn line {}", 2);
  PODNET_INFO(kColl, "info line {}", 3);
  PODNET_DEBUG(kBoot, "debug line {}", 4);
  podnet::log::logf(podnet::log::Level::kTrace, podnet::log::Subsys::kXfer, "trace line {}", 5);
  if (mode == "set-rank") {
    podnet::log::set_rank(5);
    PODNET_ERROR(kTool, "after set_rank");
  }
  return 0;
}
