// `podnet tune` writes a table the tuner reads back (PODNET_TUNER_FILE), and a table
// measured for another number of ranks, or a broken one, leaves the built-in choice.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>

#include "process.h"

using namespace podnet::testing;

namespace {

std::string rank0_text(const std::string& out) {
  std::string text;
  for (const std::string& line : rank_lines(out, 0)) text += line + "\n";
  return text;
}

std::string temp_path(const std::string& name) {
  const char* dir = getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/podnet_tune_test_" + std::to_string(getpid()) + "_" + name;
}

// allreduce algorithms of a `bench coll allreduce --json` run, one per row.
std::vector<std::string> allreduce_algorithms(const std::vector<std::string>& env) {
  std::vector<std::string> args{"run", "-n", "2", "--timeout", "50"};
  for (const auto& e : env) {
    args.push_back("--env");
    args.push_back(e);
  }
  for (const char* a : {"--", "BIN", "bench", "coll", "allreduce", "-b", "8", "-e", "64K", "-f", "64", "-n", "2",
                        "-w", "1", "--json"})
    args.push_back(std::string(a) == "BIN" ? podnet_bin() : a);
  Outcome o = run_program(podnet_bin(), args, {}, {}, 60);
  EXPECT_EQ(o.exit_code, 0) << describe(o);
  auto j = nlohmann::json::parse(rank0_text(o.out), nullptr, false);
  std::vector<std::string> algos;
  if (j.is_discarded()) return algos;
  for (const auto& r : j["results"]) algos.push_back(r.value("algorithm", ""));
  return algos;
}

TEST(Tune, WritesATableOfValidAlgorithmsForEveryCollective) {
  std::string path = temp_path("measured.json");
  Outcome o = run_program(podnet_bin(), {"run", "-n", "2", "--timeout", "100", "--", podnet_bin(), "tune", "-o",
                                         path, "-b", "8", "-e", "64K", "-f", "64", "-n", "2", "-w", "1"},
                          {}, {}, 120);
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  std::ifstream in(path);
  auto j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "no JSON table in " << path;
  EXPECT_EQ(j.value("nranks", 0), 2);
  std::set<std::string> colls;
  for (const auto& e : j["entries"]) {
    colls.insert(e.value("collective", ""));
    EXPECT_FALSE(e.value("algorithm", "").empty()) << e.dump();
  }
  EXPECT_EQ(colls, (std::set<std::string>{"allreduce", "broadcast", "allgather", "reduce_scatter", "alltoall"}));
  std::remove(path.c_str());
}

TEST(Tune, TableIsHonouredOnlyForItsRankCount) {
  std::string forced = temp_path("forced.json"), other = temp_path("other.json"), broken = temp_path("broken.json");
  std::ofstream(forced) << R"({"version":1,"nranks":2,"entries":[{"collective":"allreduce","max_bytes":1,"algorithm":"tree"}]})";
  std::ofstream(other) << R"({"version":1,"nranks":3,"entries":[{"collective":"allreduce","max_bytes":1,"algorithm":"tree"}]})";
  std::ofstream(broken) << R"({"nranks":2,"entries":[{"collective":"allreduce","max_bytes":1,"algorithm":"nope"}]})";
  // Beyond the last entry the last entry's algorithm holds: every row runs tree.
  for (const auto& a : allreduce_algorithms({"PODNET_TUNER_FILE=" + forced})) EXPECT_EQ(a, "tree");
  auto builtin = allreduce_algorithms({});
  ASSERT_FALSE(builtin.empty());
  EXPECT_NE(builtin.front(), "tree");
  EXPECT_EQ(allreduce_algorithms({"PODNET_TUNER_FILE=" + other}), builtin);
  EXPECT_EQ(allreduce_algorithms({"PODNET_TUNER_FILE=" + broken}), builtin);
  for (const auto& p : {forced, other, broken}) std::remove(p.c_str());
}

}  // namespace
