// `podnet doctor`: the host summary (what podnet sees) and the knob table, as text and JSON; a
// knob with a bad value fails with exit code 2 and names it.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "process.h"

using namespace podnet::testing;

namespace {

int yama_scope() {
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  int scope = -1;
  if (!(f >> scope)) return -1;
  return scope;
}

TEST(Doctor, JsonSaysWhatTheHostAndTheKnobsAre) {
  Outcome o = run_program(podnet_bin(), {"doctor", "--json"}, {"PODNET_SHM_PTRACER=any"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  auto j = nlohmann::json::parse(o.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.out;
  EXPECT_GE(j["system"]["cpus_online"].get<int>(), 1);
  EXPECT_EQ(j["system"]["yama_ptrace_scope"].get<int>(), yama_scope());
  bool seen = false;
  for (const auto& k : j["knobs"]) {
    if (k["env"] != "PODNET_SHM_PTRACER") continue;
    seen = true;
    EXPECT_EQ(k["value"], "any");
    EXPECT_EQ(k["default"], "parent");
    EXPECT_EQ(k["source"], "environment") << k.dump();
  }
  EXPECT_TRUE(seen) << "PODNET_SHM_PTRACER missing from the knob table";
}

TEST(Doctor, TextNamesThePtraceRestriction) {
  Outcome o = run_program(podnet_bin(), {"doctor"});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  const int scope = yama_scope();
  const char* want = scope < 0 ? "no Yama" : scope == 0 ? "scope 0" : scope == 1 ? "scope 1" : "scope 2+";
  EXPECT_NE(o.out.find(std::string("ptrace    ") + want), std::string::npos) << o.out;
}

TEST(Doctor, ABadKnobFailsWithItsName) {
  Outcome o = run_program(podnet_bin(), {"doctor", "--config"}, {"PODNET_SHM_RING=lots"});
  EXPECT_EQ(o.exit_code, 2) << describe(o);
  EXPECT_NE((o.out + o.err).find("PODNET_SHM_RING='lots'"), std::string::npos) << describe(o);
}

}  // namespace
