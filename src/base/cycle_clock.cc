#include "base/cycle_clock.h"

#include <fstream>
#include <mutex>
#include <string>

#include "base/config.h"

namespace podnet {
namespace {

constexpr const char* kClocksourceFile = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
constexpr int64_t kCalibrateNs = 10'000'000;

struct Stamp {
  uint64_t ticks = 0;
  int64_t ns = 0;
};

// A (ticks, ns) pair: of a few tries, the one whose two counter reads around the clock read
// were closest together (nothing interrupted it), with the clock read at their midpoint.
Stamp stamp(const CycleClock& c) {
  Stamp best;
  uint64_t width = UINT64_MAX;
  for (int i = 0; i < 7; ++i) {
    uint64_t a = c.ticks();
    int64_t n = now_ns();
    uint64_t b = c.ticks();
    if (b >= a && b - a < width) {
      width = b - a;
      best = {a + (b - a) / 2, n};
    }
  }
  return best;
}

}  // namespace

bool CycleClock::counter_trusted() {
  std::string cs;
  std::getline(std::ifstream(kClocksourceFile), cs);
  switch (native_counter()) {
    case Source::kTsc:
      return cs == "tsc";
    case Source::kCntvct:
      return cs == "arch_sys_counter";
    default:
      return false;
  }
}

CycleClock CycleClock::make(Source wanted, int64_t calibrate_ns, bool fenced) {
  CycleClock c;
  if (wanted == Source::kMonotonic || wanted != native_counter()) return c;
  c.source_ = wanted;
  c.fenced_ = fenced && wanted == Source::kTsc;
  Stamp s0 = stamp(c);
  while (now_ns() - s0.ns < calibrate_ns) cpu_relax();
  Stamp s1 = stamp(c);
  if (s1.ticks <= s0.ticks || s1.ns <= s0.ns) return CycleClock{};  // a counter that did not count
  c.ns_per_tick_ = static_cast<double>(s1.ns - s0.ns) / static_cast<double>(s1.ticks - s0.ticks);
  return c;
}

Result<const CycleClock*> CycleClock::for_benchmarks() {
  static std::once_flag once;
  static CycleClock clock;
  const std::string& want = config().bench_timer;
  if (want != "auto" && want != "fenced" && want != "clock")
    return Status::InvalidArgument("PODNET_BENCH_TIMER='{}': expected auto, fenced or clock", want);
  std::call_once(once, [&] {
    if (want != "clock" && counter_trusted()) clock = make(native_counter(), kCalibrateNs, want == "fenced");
  });
  return &clock;
}

std::string_view CycleClock::name() const noexcept {
  switch (source_) {
    case Source::kTsc:
      return fenced_ ? "tsc+lfence" : "tsc";
    case Source::kCntvct:
      return "cntvct";
    default:
      return "clock_gettime";
  }
}

}  // namespace podnet
