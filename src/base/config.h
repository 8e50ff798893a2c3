// Typed configuration: every PODNET_* knob is declared once in knobs.def and read once into
// a snapshot. Nothing calls getenv on a data path.
// Thread-safety: load() is idempotent and safe from any thread; the snapshot is immutable.
#pragma once

#include <podnet/status.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace podnet {

struct Config {
#define PODNET_KNOB_T_bool bool
#define PODNET_KNOB_T_int int
#define PODNET_KNOB_T_size uint64_t
#define PODNET_KNOB_T_string std::string
#define PODNET_KNOB(member, type, env, def, help) PODNET_KNOB_T_##type member{};
#include "knobs.def"
#undef PODNET_KNOB
};

enum class KnobSource { kDefault, kEnvironment, kOverride };
std::string_view knob_source_name(KnobSource s) noexcept;

struct KnobInfo {
  std::string member;
  std::string type;
  std::string env;
  std::string default_value;
  std::string help;
  std::string value;  // effective value, as text
  KnobSource source = KnobSource::kDefault;
};

// Reads a config from `getenv_fn` (tests pass their own). A bad value is an error that
// names the variable and quotes the value.
using EnvLookup = std::function<const char*(const char*)>;
Result<Config> parse_config(const EnvLookup& getenv_fn, std::vector<KnobInfo>* info = nullptr);

// The process-wide snapshot, read from the environment on first use. load_config() returns
// the error for a bad value; config() exits with that error (for tools and hot paths that
// run only after a successful load).
Status load_config();
const Config& config();
std::vector<KnobInfo> describe_config();

// Parses "64K", "1M", "2G", "4096" (binary multiples).
Result<uint64_t> parse_size(std::string_view text);

}  // namespace podnet
