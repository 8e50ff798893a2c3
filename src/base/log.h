// Logging with levels and subsystems. Configured from PODNET_LOG, PODNET_LOG_SUBSYS and
// PODNET_LOG_FILE on first use. Every line: "[rank R host pid P] LEVEL subsys: message".
// Thread-safety: all functions may be called from any thread; a line is written atomically.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <string>
#include <string_view>

namespace podnet::log {

enum class Level : int { kError = 0, kWarn, kInfo, kDebug, kTrace };
enum class Subsys : unsigned { kBase = 1, kNet = 2, kBoot = 4, kXfer = 8, kColl = 16, kTool = 32 };

std::string_view level_name(Level l) noexcept;
std::string_view subsys_name(Subsys s) noexcept;

// Internal: the active level and subsystem mask (read on every log call, so kept atomic).
extern std::atomic<int> g_level;
extern std::atomic<unsigned> g_subsys;
void init_once();

inline bool enabled(Level l, Subsys s) noexcept {
  init_once();
  return static_cast<int>(l) <= g_level.load(std::memory_order_relaxed) &&
         (g_subsys.load(std::memory_order_relaxed) & static_cast<unsigned>(s)) != 0;
}

void write(Level l, Subsys s, std::string_view message);
void set_rank(int rank);  // changes the line prefix and the %r in PODNET_LOG_FILE
void set_level(Level l);

template <typename... A>
void logf(Level l, Subsys s, fmt::format_string<A...> f, A&&... a) {
  if (enabled(l, s)) write(l, s, fmt::format(f, std::forward<A>(a)...));
}

}  // namespace podnet::log

#define PODNET_LOG_AT(level, subsys, ...)                                                 \
  do {                                                                                    \
    if (::podnet::log::enabled(::podnet::log::Level::level, ::podnet::log::Subsys::subsys)) \
      ::podnet::log::write(::podnet::log::Level::level, ::podnet::log::Subsys::subsys,    \
                           fmt::format(__VA_ARGS__));                                     \
  } while (0)
#define PODNET_ERROR(subsys, ...) PODNET_LOG_AT(kError, subsys, __VA_ARGS__)
#define PODNET_WARN(subsys, ...) PODNET_LOG_AT(kWarn, subsys, __VA_ARGS__)
#define PODNET_INFO(subsys, ...) PODNET_LOG_AT(kInfo, subsys, __VA_ARGS__)
#define PODNET_DEBUG(subsys, ...) PODNET_LOG_AT(kDebug, subsys, __VA_ARGS__)
#define PODNET_TRACE(subsys, ...) PODNET_LOG_AT(kTrace, subsys, __VA_ARGS__)
