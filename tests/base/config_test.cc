#include "base/config.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace podnet {
namespace {

// A fake environment: parse_config sees only these variables.
EnvLookup fake_env(std::map<std::string, std::string> vars) {
  auto owned = std::make_shared<const std::map<std::string, std::string>>(std::move(vars));
  return [owned](const char* name) -> const char* {
    auto it = owned->find(name);
    return it == owned->end() ? nullptr : it->second.c_str();
  };
}

const KnobInfo* find_knob(const std::vector<KnobInfo>& info, std::string_view env) {
  for (const KnobInfo& k : info)
    if (k.env == env) return &k;
  return nullptr;
}

TEST(ConfigTest, DefaultsWhenEnvironmentIsEmpty) {
  const EnvLookup env = fake_env({});
  std::vector<KnobInfo> info;
  Result<Config> r = parse_config(env, &info);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Config& c = *r;
  EXPECT_EQ(c.log, "warn");
  EXPECT_EQ(c.log_subsys, "all");
  EXPECT_EQ(c.log_file, "");
  EXPECT_EQ(c.transport, "auto");
  EXPECT_EQ(c.tcp_streams, 0);  // auto: 1 or 4 per interface (bootstrap/netif.h)
  EXPECT_EQ(c.tcp_stripe_min, 256u * 1024);
  EXPECT_EQ(c.tcp_chunk, 512u * 1024);
  EXPECT_EQ(c.tcp_eager_max, 0u);  // auto: chosen from the links (bootstrap/netif.h)
  EXPECT_EQ(c.tcp_sndbuf, 0u);
  EXPECT_FALSE(c.busy_poll);
  EXPECT_EQ(c.rank, -1);
  EXPECT_EQ(c.peer_timeout_ms, 15000);

  ASSERT_FALSE(info.empty());
  for (const KnobInfo& k : info) {
    EXPECT_EQ(k.source, KnobSource::kDefault) << k.env;
    EXPECT_EQ(k.env.rfind("PODNET_", 0), 0u) << k.env;
    EXPECT_FALSE(k.help.empty()) << k.env;
    EXPECT_TRUE(k.type == "bool" || k.type == "int" || k.type == "size" || k.type == "string") << k.type;
  }
  const KnobInfo* stripe = find_knob(info, "PODNET_TCP_STRIPE_MIN");
  ASSERT_NE(stripe, nullptr);
  EXPECT_EQ(stripe->member, "tcp_stripe_min");
  EXPECT_EQ(stripe->type, "size");
  EXPECT_EQ(stripe->default_value, "256K");
  EXPECT_EQ(stripe->value, "262144");
  const KnobInfo* busy = find_knob(info, "PODNET_BUSY_POLL");
  ASSERT_NE(busy, nullptr);
  EXPECT_EQ(busy->default_value, "false");
  EXPECT_EQ(busy->value, "false");
}

TEST(ConfigTest, KnobNamesAreUnique) {
  const EnvLookup env = fake_env({});
  std::vector<KnobInfo> info;
  ASSERT_TRUE(parse_config(env, &info).ok());
  for (size_t i = 0; i < info.size(); ++i)
    for (size_t j = i + 1; j < info.size(); ++j) {
      EXPECT_NE(info[i].env, info[j].env);
      EXPECT_NE(info[i].member, info[j].member);
    }
}

TEST(ConfigTest, ParsesEveryTypeAndReportsEnvironmentSource) {
  const EnvLookup env = fake_env({{"PODNET_TCP_STREAMS", "8"},
                                  {"PODNET_RANK", "-3"},
                                  {"PODNET_TCP_CHUNK", "2M"},
                                  {"PODNET_TCP_SNDBUF", "4096"},
                                  {"PODNET_BUSY_POLL", "yes"},
                                  {"PODNET_TRANSPORT", "tcp"},
                                  {"PODNET_IFNAME", "^eth"}});
  std::vector<KnobInfo> info;
  Result<Config> r = parse_config(env, &info);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->tcp_streams, 8);
  EXPECT_EQ(r->rank, -3);
  EXPECT_EQ(r->tcp_chunk, 2u << 20);
  EXPECT_EQ(r->tcp_sndbuf, 4096u);
  EXPECT_TRUE(r->busy_poll);
  EXPECT_EQ(r->transport, "tcp");
  EXPECT_EQ(r->ifname, "^eth");

  for (const char* name : {"PODNET_TCP_STREAMS", "PODNET_RANK", "PODNET_TCP_CHUNK", "PODNET_TCP_SNDBUF",
                           "PODNET_BUSY_POLL", "PODNET_TRANSPORT", "PODNET_IFNAME"}) {
    const KnobInfo* k = find_knob(info, name);
    ASSERT_NE(k, nullptr) << name;
    EXPECT_EQ(k->source, KnobSource::kEnvironment) << name;
  }
  EXPECT_EQ(find_knob(info, "PODNET_TCP_CHUNK")->value, std::to_string(2u << 20));
  EXPECT_EQ(find_knob(info, "PODNET_BUSY_POLL")->value, "true");
  EXPECT_EQ(find_knob(info, "PODNET_RANK")->value, "-3");
  // Untouched knobs still say default.
  EXPECT_EQ(find_knob(info, "PODNET_LOG")->source, KnobSource::kDefault);
  EXPECT_EQ(find_knob(info, "PODNET_TCP_EAGER_MAX")->source, KnobSource::kDefault);
}

TEST(ConfigTest, BooleanSpellings) {
  for (const char* t : {"1", "true", "yes", "on"}) {
    const EnvLookup env = fake_env({{"PODNET_BUSY_POLL", t}});
    Result<Config> r = parse_config(env);
    ASSERT_TRUE(r.ok()) << t;
    EXPECT_TRUE(r->busy_poll) << t;
  }
  for (const char* f : {"0", "false", "no", "off"}) {
    const EnvLookup env = fake_env({{"PODNET_BUSY_POLL", f}});
    Result<Config> r = parse_config(env);
    ASSERT_TRUE(r.ok()) << f;
    EXPECT_FALSE(r->busy_poll) << f;
  }
}

TEST(ConfigTest, EmptyStringIsAValueNotTheDefault) {
  const EnvLookup env = fake_env({{"PODNET_TRANSPORT", ""}});
  std::vector<KnobInfo> info;
  Result<Config> r = parse_config(env, &info);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->transport, "");
  EXPECT_EQ(find_knob(info, "PODNET_TRANSPORT")->source, KnobSource::kEnvironment);
}

// Every bad value must produce an error naming the variable and quoting the value.
struct BadValue {
  const char* env;
  const char* value;
};

TEST(ConfigTest, BadValuesAreErrorsThatQuoteTheValue) {
  const BadValue cases[] = {
      {"PODNET_TCP_STREAMS", "4x"},         {"PODNET_TCP_STREAMS", ""},
      {"PODNET_TCP_STREAMS", "1.5"},        {"PODNET_TCP_STREAMS", "99999999999"},
      {"PODNET_TCP_STREAMS", " 4"},         {"PODNET_TCP_CHUNK", "12Q"},
      {"PODNET_TCP_CHUNK", "-1"},           {"PODNET_TCP_CHUNK", "K"},
      {"PODNET_TCP_CHUNK", "1.5M"},         {"PODNET_TCP_CHUNK", "99999999999999999999"},
      {"PODNET_TCP_CHUNK", "17179869184G"}, {"PODNET_BUSY_POLL", "maybe"},
      {"PODNET_BUSY_POLL", "TRUE "},        {"PODNET_BUSY_POLL", ""},
  };
  for (const BadValue& c : cases) {
    const EnvLookup env = fake_env({{c.env, c.value}});
    Result<Config> r = parse_config(env);
    ASSERT_FALSE(r.ok()) << c.env << "=" << c.value;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    const std::string quoted = std::string(c.env) + "='" + c.value + "'";
    EXPECT_NE(r.status().message().find(quoted), std::string::npos)
        << "message: " << r.status().message() << "\nexpected to contain: " << quoted;
  }
}

TEST(ConfigTest, AllBadValuesAreReportedTogether) {
  const EnvLookup env =
      fake_env({{"PODNET_TCP_STREAMS", "four"}, {"PODNET_BUSY_POLL", "maybe"}, {"PODNET_TCP_CHUNK", "1M"}});
  std::vector<KnobInfo> info;
  Result<Config> r = parse_config(env, &info);
  ASSERT_FALSE(r.ok());
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find("PODNET_TCP_STREAMS='four'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("PODNET_BUSY_POLL='maybe'"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("PODNET_TCP_CHUNK"), std::string::npos) << msg;
  // The description is still filled in, so tools can show every knob next to the error.
  EXPECT_EQ(find_knob(info, "PODNET_TCP_CHUNK")->value, std::to_string(1u << 20));
}

TEST(ConfigTest, SourceNames) {
  EXPECT_EQ(knob_source_name(KnobSource::kDefault), "default");
  EXPECT_EQ(knob_source_name(KnobSource::kEnvironment), "environment");
  EXPECT_EQ(knob_source_name(KnobSource::kOverride), "override");
}

TEST(ParseSizeTest, PlainAndSuffixed) {
  struct Case {
    const char* text;
    uint64_t want;
  };
  const Case cases[] = {
      {"0", 0},
      {"4096", 4096},
      {"64K", 64ull << 10},
      {"64k", 64ull << 10},
      {"1M", 1ull << 20},
      {"3m", 3ull << 20},
      {"2G", 2ull << 30},
      {"2g", 2ull << 30},
      {"1T", 1ull << 40},
      {"5t", 5ull << 40},
      {"18446744073709551615", UINT64_MAX},
      {"16777215T", 16777215ull << 40},  // the largest whole number of T that fits
  };
  for (const Case& c : cases) {
    Result<uint64_t> r = parse_size(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.status().to_string();
    EXPECT_EQ(*r, c.want) << c.text;
  }
}

TEST(ParseSizeTest, RejectsMalformedAndOverflowingSizes) {
  for (const char* bad : {"", "K", "-1", "1.5M", "12Q", "1KB", " 1", "1 ", "0x10", "M1"}) {
    Result<uint64_t> r = parse_size(bad);
    EXPECT_FALSE(r.ok()) << "'" << bad << "'";
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    }
  }
  for (const char* big :
       {"18446744073709551616", "16777216T", "17179869184G", "17592186044416M", "18014398509481984K"}) {
    Result<uint64_t> r = parse_size(big);
    ASSERT_FALSE(r.ok()) << big;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  }
  EXPECT_NE(parse_size("16777216T").status().message().find("overflow"), std::string::npos);
}

}  // namespace
}  // namespace podnet
