#include "log.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <mutex>

#include "config.h"

namespace podnet::log {

std::atomic<int> g_level{static_cast<int>(Level::kWarn)};
std::atomic<unsigned> g_subsys{~0u};

namespace {

std::mutex g_mu;
std::FILE* g_out = stderr;
std::string g_host;
int g_rank = -1;
std::string g_file_pattern;
std::once_flag g_once;

std::string expand_pattern(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[++i];
      if (c == 'h') out += g_host;
      else if (c == 'p') out += std::to_string(getpid());
      else if (c == 'r') out += std::to_string(g_rank);
      else if (c == '%') out += '%';
      else { out += '%'; out += c; }
    } else {
      out += pattern[i];
    }
  }
  return out;
}

void open_file_locked() {
  if (g_file_pattern.empty()) return;
  std::string path = expand_pattern(g_file_pattern);
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) {
    std::fprintf(stderr, "podnet: cannot open PODNET_LOG_FILE '%s'; logging to stderr\n", path.c_str());
    return;
  }
  if (g_out != stderr) std::fclose(g_out);
  g_out = f;
}

bool parse_level(std::string_view s, Level* out) {
  static constexpr std::string_view kNames[] = {"error", "warn", "info", "debug", "trace"};
  for (int i = 0; i < 5; ++i)
    if (s == kNames[i]) { *out = static_cast<Level>(i); return true; }
  return false;
}

}  // namespace

std::string_view level_name(Level l) noexcept {
  static constexpr std::string_view kNames[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
  return kNames[static_cast<int>(l)];
}

std::string_view subsys_name(Subsys s) noexcept {
  switch (s) {
    case Subsys::kBase: return "base";
    case Subsys::kNet: return "net";
    case Subsys::kBoot: return "boot";
    case Subsys::kXfer: return "xfer";
    case Subsys::kColl: return "coll";
    case Subsys::kTool: return "tool";
  }
  return "?";
}

void init_once() {
  std::call_once(g_once, [] {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    g_host = host;
    const char* rank = std::getenv("PODNET_RANK");
    if (rank != nullptr) g_rank = std::atoi(rank);
    // Read the knobs directly from the config parser so a bad unrelated knob does not
    // silence logging; config errors are reported where they are used.
    auto cfg = parse_config([](const char* n) { return std::getenv(n); });
    if (!cfg.ok()) return;
    Level l;
    if (parse_level(cfg->log, &l)) {
      g_level.store(static_cast<int>(l));
    } else {
      std::fprintf(stderr, "podnet: PODNET_LOG='%s' is not error|warn|info|debug|trace; using warn\n",
                   cfg->log.c_str());
    }
    if (cfg->log_subsys != "all" && !cfg->log_subsys.empty()) {
      unsigned mask = 0;
      std::string_view rest = cfg->log_subsys;
      while (!rest.empty()) {
        size_t comma = rest.find(',');
        std::string_view name = rest.substr(0, comma);
        bool found = false;
        for (unsigned bit = 1; bit <= 32; bit <<= 1)
          if (subsys_name(static_cast<Subsys>(bit)) == name) { mask |= bit; found = true; }
        if (!found)
          std::fprintf(stderr, "podnet: PODNET_LOG_SUBSYS names unknown subsystem '%.*s'\n",
                       static_cast<int>(name.size()), name.data());
        rest = comma == std::string_view::npos ? "" : rest.substr(comma + 1);
      }
      g_subsys.store(mask);
    }
    g_file_pattern = cfg->log_file;
    std::lock_guard lk(g_mu);
    open_file_locked();
  });
}

void set_rank(int rank) {
  init_once();
  std::lock_guard lk(g_mu);
  if (rank == g_rank) return;
  g_rank = rank;
  if (g_file_pattern.find("%r") != std::string::npos) open_file_locked();
}

void set_level(Level l) {
  init_once();
  g_level.store(static_cast<int>(l));
}

void write(Level l, Subsys s, std::string_view message) {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  tm tmv;
  localtime_r(&ts.tv_sec, &tmv);
  std::lock_guard lk(g_mu);
  std::string line = fmt::format("[{:02}:{:02}:{:02}.{:06} rank {} {} pid {}] {} {}: {}\n",
                                 tmv.tm_hour, tmv.tm_min, tmv.tm_sec, ts.tv_nsec / 1000,
                                 g_rank, g_host, getpid(), level_name(l), subsys_name(s), message);
  std::fwrite(line.data(), 1, line.size(), g_out);
  std::fflush(g_out);
}

}  // namespace podnet::log
