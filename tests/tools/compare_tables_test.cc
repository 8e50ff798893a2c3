// bench/compare_coll.sh's verdicts, from measurements given to it (--table-from): every
// anchor is set against podnet in the form the anchor has (in place against Gloo's allreduce
// and every broadcast, out of place otherwise), a row's ratio is the lowest over its anchors,
// and the targets follow the transport. Nothing is run: no Open MPI or Gloo needed.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "process.h"

using namespace podnet::testing;
using nlohmann::json;

namespace {

std::string script() { return env_or("PODNET_SOURCE_DIR", ".") + "/bench/compare_coll.sh"; }

json podnet(int ranks, const char* coll, uint64_t bytes, double oop_us, double ip_us) {
  return {{"tool", "podnet"}, {"ranks", ranks},    {"coll", coll},       {"algo", "ring"},
          {"bytes", bytes},   {"time_us", oop_us}, {"time_ip_us", ip_us}};
}
json anchor(const char* tool, const char* algo, int ranks, const char* coll, uint64_t bytes, double us) {
  return {{"tool", tool}, {"ranks", ranks}, {"coll", coll}, {"algo", algo}, {"bytes", bytes}, {"time_us", us}};
}

// Measurements where the in-place and out-of-place times of podnet differ a lot, so that
// comparing an anchor with the wrong one changes the verdict.
json measurements() {
  const uint64_t MiB = 1 << 20;
  return json::array({
      // 8 B allreduce: Open MPI 20 against podnet out of place 10 (2.0; podnet/mpi 0.5), Gloo
      // halving-doubling 6 and ring 7 against podnet in place 5 (1.2, 1.4): ratio 1.2.
      podnet(2, "allreduce", 8, 10, 5),
      anchor("mpi", "", 2, "allreduce", 8, 20),
      anchor("gloo", "allreduce_halving_doubling", 2, "allreduce", 8, 6),
      anchor("gloo", "allreduce_ring_chunked", 2, "allreduce", 8, 7),
      // 1 MiB broadcast: both anchors against podnet in place 4: 5.6 / 4 = 1.4 (out of place it
      // would be 0.56).
      podnet(2, "broadcast", MiB, 10, 4),
      anchor("mpi", "", 2, "broadcast", MiB, 5.6),
      anchor("gloo", "broadcast", 2, "broadcast", MiB, 6),
      // 1 MiB allgather: out of place 10 against Open MPI 12: 1.2 (in place 1 must not count).
      podnet(2, "allgather", MiB, 10, 1),
      anchor("mpi", "", 2, "allgather", MiB, 12),
      anchor("gloo", "allgather", 2, "allgather", MiB, 20),
      // 32 B alltoall: out of place 10 against 11: 1.1 (in place 100 must not count).
      podnet(2, "alltoall", 32, 10, 100),
      anchor("mpi", "", 2, "alltoall", 32, 11),
  });
}

struct Table {
  Outcome o;
  json doc;
};

// Runs the script on `input` (written to a file) with --json; `extra` are more arguments.
Table table_of(const std::string& input, const std::vector<std::string>& extra = {}) {
  char dir[] = "/tmp/compare_tables_test.XXXXXX";
  Table t;
  if (mkdtemp(dir) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return t;
  }
  const std::string in = std::string(dir) + "/in.json", out = std::string(dir) + "/out.json";
  std::ofstream(in) << input;
  std::vector<std::string> args{script(), "--table-from", in, "--json", out};
  args.insert(args.end(), extra.begin(), extra.end());
  t.o = run_program("bash", args, {}, {}, 60);
  std::ifstream f(out);
  if (f) t.doc = json::parse(f, nullptr, false);
  std::system(("rm -rf " + std::string(dir)).c_str());
  return t;
}

const json* row(const json& doc, const char* coll, uint64_t bytes) {
  for (const auto& r : doc["rows"])
    if (r["coll"] == coll && r["bytes"] == bytes) return &r;
  return nullptr;
}

std::string raw_lines(const json& m) {
  std::string s;
  for (const auto& d : m) s += d.dump() + "\n";
  return s;
}

TEST(CompareColl, EachAnchorAgainstPodnetInTheFormItHas) {
  Table t = table_of(raw_lines(measurements()));
  ASSERT_EQ(t.o.exit_code, 0) << describe(t.o);
  ASSERT_TRUE(t.doc.is_object()) << describe(t.o);
  EXPECT_EQ(t.doc["transport"], "tcp");

  const json* ar = row(t.doc, "allreduce", 8);
  ASSERT_NE(ar, nullptr);
  EXPECT_NEAR((*ar)["ratios"]["mpi"].get<double>(), 2.0, 1e-9);
  EXPECT_NEAR((*ar)["ratios"]["gloo_halving_doubling"].get<double>(), 1.2, 1e-9);
  EXPECT_NEAR((*ar)["ratios"]["gloo_ring_chunked"].get<double>(), 1.4, 1e-9);
  EXPECT_NEAR((*ar)["ratio"].get<double>(), 1.2, 1e-9);
  EXPECT_EQ((*ar)["best_anchor"], "gloo_halving_doubling");
  EXPECT_NEAR((*ar)["podnet_compared_us"].get<double>(), 5, 1e-9);
  EXPECT_NEAR((*ar)["podnet_over_mpi_8B"].get<double>(), 0.5, 1e-9);  // the latency target: out of place
  EXPECT_TRUE((*ar)["pass"].get<bool>());

  const json* bc = row(t.doc, "broadcast", 1 << 20);
  ASSERT_NE(bc, nullptr);
  EXPECT_NEAR((*bc)["ratio"].get<double>(), 1.4, 1e-9);
  EXPECT_EQ((*bc)["best_anchor"], "mpi");
  EXPECT_TRUE((*bc)["pass"].get<bool>());  // >= 1.3 from 1 MiB over tcp

  const json* ag = row(t.doc, "allgather", 1 << 20);
  ASSERT_NE(ag, nullptr);
  EXPECT_NEAR((*ag)["ratio"].get<double>(), 1.2, 1e-9);
  EXPECT_NEAR((*ag)["ratios"]["gloo_allgather"].get<double>(), 2.0, 1e-9);
  EXPECT_FALSE((*ag)["pass"].get<bool>());

  const json* aa = row(t.doc, "alltoall", 32);
  ASSERT_NE(aa, nullptr);
  EXPECT_NEAR((*aa)["ratio"].get<double>(), 1.1, 1e-9);
  EXPECT_TRUE((*aa)["pass"].get<bool>());

  EXPECT_EQ(t.doc["pass"], 3);
  EXPECT_EQ(t.doc["fail"], 1);
  EXPECT_NE(t.o.out.find("# 3 PASS, 1 FAIL"), std::string::npos) << t.o.out;
}

TEST(CompareColl, TheTransportOfTheRunDecidesTheTargets) {
  // The same measurements as an earlier shm run's --json file: every size needs only 1.0,
  // so the 1 MiB allgather (1.2) passes; an 8 B allreduce has no latency target there.
  json doc = {{"benchmark", "compare_coll"}, {"transport", "shm"}, {"raw", measurements()}};
  Table t = table_of(doc.dump());
  ASSERT_EQ(t.o.exit_code, 0) << describe(t.o);
  EXPECT_EQ(t.doc["transport"], "shm");
  EXPECT_EQ(t.doc["pass"], 4);
  EXPECT_EQ(t.doc["fail"], 0);
  const json* ar = row(t.doc, "allreduce", 8);
  ASSERT_NE(ar, nullptr);
  EXPECT_TRUE((*ar)["podnet_over_mpi_8B"].is_null());
}

TEST(CompareColl, AMissingFileIsNamed) {
  Outcome o = run_program("bash", {script(), "--table-from", "/nonexistent/raw.json"}, {}, {}, 60);
  EXPECT_EQ(o.exit_code, 1) << describe(o);
  EXPECT_NE(o.err.find("/nonexistent/raw.json"), std::string::npos) << describe(o);
}

}  // namespace
