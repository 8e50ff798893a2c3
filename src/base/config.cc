#include "config.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace podnet {
namespace {

Status parse_value(std::string_view env, std::string_view text, bool* out) {
  if (text == "1" || text == "true" || text == "yes" || text == "on") { *out = true; return {}; }
  if (text == "0" || text == "false" || text == "no" || text == "off") { *out = false; return {}; }
  return Status::InvalidArgument("{}='{}': expected a boolean (1/0, true/false, yes/no, on/off)", env, text);
}

Status parse_value(std::string_view env, std::string_view text, int* out) {
  int v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty())
    return Status::InvalidArgument("{}='{}': expected an integer", env, text);
  *out = v;
  return {};
}

Status parse_value(std::string_view env, std::string_view text, uint64_t* out) {
  auto r = parse_size(text);
  if (!r.ok()) return Status::InvalidArgument("{}='{}': {}", env, text, r.status().message());
  *out = *r;
  return {};
}

Status parse_value(std::string_view, std::string_view text, std::string* out) {
  *out = std::string(text);
  return {};
}

std::string show(bool v) { return v ? "true" : "false"; }
std::string show(int v) { return std::to_string(v); }
std::string show(uint64_t v) { return std::to_string(v); }
std::string show(const std::string& v) { return v; }

// A knob's default as written in knobs.def, as text.
std::string default_text(bool v) { return show(v); }
std::string default_text(int v) { return show(v); }
std::string default_text(const char* v) { return v; }

// Parses one knob's default and then its variable (if set) into *out; appends errors.
template <typename T>
void read_knob(const EnvLookup& getenv_fn, const char* member, const char* type, const char* env, std::string def,
               const char* help, T* out, std::string& errors, std::vector<KnobInfo>* info) {
  KnobInfo ki{member, type, env, std::move(def), help, {}, KnobSource::kDefault};
  Status st = parse_value(env, ki.default_value, out);
  if (!st.ok()) errors += "internal default: " + st.message() + "; ";
  if (const char* v = getenv_fn(env); v != nullptr) {
    st = parse_value(env, v, out);
    if (!st.ok()) errors += (errors.empty() ? "" : "; ") + st.message();
    ki.source = KnobSource::kEnvironment;
  }
  ki.value = show(*out);
  if (info) info->push_back(std::move(ki));
}

std::once_flag g_once;
Config g_config;
Status g_status;
std::vector<KnobInfo> g_info;

}  // namespace

std::string_view knob_source_name(KnobSource s) noexcept {
  switch (s) {
    case KnobSource::kDefault: return "default";
    case KnobSource::kEnvironment: return "environment";
    case KnobSource::kOverride: return "override";
  }
  return "?";
}

Result<uint64_t> parse_size(std::string_view text) {
  if (text.empty()) return Status::InvalidArgument("empty size");
  uint64_t mult = 1;
  char last = text.back();
  switch (last) {
    case 'k': case 'K': mult = 1ull << 10; break;
    case 'm': case 'M': mult = 1ull << 20; break;
    case 'g': case 'G': mult = 1ull << 30; break;
    case 't': case 'T': mult = 1ull << 40; break;
    default: break;
  }
  if (mult != 1) text.remove_suffix(1);
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty())
    return Status::InvalidArgument("expected a size such as 4096, 64K, 1M or 2G");
  if (v > UINT64_MAX / mult) return Status::InvalidArgument("size overflows 64 bits");
  return v * mult;
}

Result<Config> parse_config(const EnvLookup& getenv_fn, std::vector<KnobInfo>* info) {
  Config c;
  std::string errors;
  // One call per knob: the macro expands to a call of read_knob(), not to its body, so that
  // this function stays small (inlining ~70 copies of the body made config.cc the slowest
  // file of the build).
#define PODNET_KNOB(member, type, env, def, help) \
  read_knob(getenv_fn, #member, #type, env, default_text(def), help, &c.member, errors, info);
#include "knobs.def"
#undef PODNET_KNOB
  if (!errors.empty()) return Status::InvalidArgument("bad configuration: {}", errors);
  return c;
}

Status load_config() {
  std::call_once(g_once, [] {
    std::vector<KnobInfo> info;
    auto r = parse_config([](const char* n) { return std::getenv(n); }, &info);
    if (r.ok()) g_config = std::move(r).value(); else g_status = r.status();
    g_info = std::move(info);
  });
  return g_status;
}

const Config& config() {
  Status st = load_config();
  if (!st.ok()) {
    std::fprintf(stderr, "podnet: %s\n", st.to_string().c_str());
    std::exit(2);
  }
  return g_config;
}

std::vector<KnobInfo> describe_config() {
  (void)load_config();
  return g_info;
}

}  // namespace podnet
