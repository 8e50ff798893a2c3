// bench/compare_coll.sh's and bench/compare_lab.sh's verdicts, from measurements given to
// them (--table-from): every anchor is set against podnet in the form the anchor has (in place
// against Gloo's allreduce and every broadcast, out of place otherwise), a row's ratio is the
// lowest over its anchors, and the targets follow the transport (coll) or the link (lab).
// Nothing is run: no Open MPI, Gloo, lab or root needed.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "process.h"

using namespace podnet::testing;
using nlohmann::json;

namespace {

std::string script(const char* name = "compare_coll.sh") { return env_or("PODNET_SOURCE_DIR", ".") + "/bench/" + name; }

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

// Runs the script on `input` (written to a file) with --json.
Table table_of(const std::string& input, const char* name = "compare_coll.sh") {
  char dir[] = "/tmp/compare_tables_test.XXXXXX";
  Table t;
  if (mkdtemp(dir) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return t;
  }
  const std::string in = std::string(dir) + "/in.json", out = std::string(dir) + "/out.json";
  std::ofstream(in) << input;
  t.o = run_program("bash", {script(name), "--table-from", in, "--json", out}, {}, {}, 60);
  std::ifstream f(out);
  if (f) t.doc = json::parse(f, nullptr, false);
  std::filesystem::remove_all(dir);
  return t;
}

const json* row(const json& doc, const char* coll, uint64_t bytes) {
  for (const auto& r : doc["rows"])
    if (r["coll"] == coll && r["bytes"] == bytes) return &r;
  return nullptr;
}

// A lab measurement: the time per call that gives busbw `frac` of a 1 Gbit/s link on 4 hosts.
double lab_us(const char* coll, uint64_t bytes, double frac) {
  const double factor = std::string(coll) == "allreduce" ? 2.0 * 3 / 4 : 3.0 / 4;
  return static_cast<double>(bytes) * factor * 8 / (frac * 1e9) * 1e6;
}
json lab_podnet(const char* coll, uint64_t bytes, double oop, double ip) {
  return {{"tool", "podnet"},
          {"hosts", 4},
          {"coll", coll},
          {"algo", "ring"},
          {"bytes", bytes},
          {"time_us", lab_us(coll, bytes, oop)},
          {"time_ip_us", lab_us(coll, bytes, ip)}};
}
json lab_anchor(const char* tool, const char* algo, const char* coll, uint64_t bytes, double frac) {
  return {{"tool", tool}, {"hosts", 4},     {"coll", coll},
          {"algo", algo}, {"bytes", bytes}, {"time_us", lab_us(coll, bytes, frac)}};
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

json cpu(const char* of, int ranks, const char* coll, uint64_t lo, uint64_t hi, double rt_ns) {
  return {{"tool", "_cpu"}, {"of", of}, {"ranks", ranks}, {"coll", coll},  {"lo", lo},
          {"hi", hi},       {"rep", 1}, {"rt_ns", rt_ns}, {"cpus", {0, 1}}};
}

TEST(CompareColl, RowsWhoseToolsRanInDifferentCpuModesAreMarkedNotExcused) {
  // The CPUs' round trip around each tool's runs: the 8 B allreduce's podnet ran at ~105 ns and
  // its best anchor (Gloo halving-doubling) at ~490: marked. The 1 MiB allgather (a FAIL) the
  // other way round: marked, and still a FAIL. The 32 B alltoall's 100 against 120: alike.
  const uint64_t MiB = 1 << 20;
  json m = measurements();
  for (const json& c :
       {cpu("podnet", 2, "allreduce", 8, 8192, 100), cpu("podnet", 2, "allreduce", 8, 8192, 110),
        cpu("gloo_halving_doubling", 2, "allreduce", 8, 8192, 480),
        cpu("gloo_halving_doubling", 2, "allreduce", 8, 8192, 500), cpu("mpi", 2, "allreduce", 8, 8192, 105),
        cpu("podnet", 2, "allgather", MiB, 4 * MiB, 500), cpu("mpi", 2, "allgather", MiB, 4 * MiB, 100),
        cpu("podnet", 2, "alltoall", 8, 8192, 100), cpu("mpi", 2, "alltoall", 8, 8192, 120)})
    m.push_back(c);
  Table t = table_of(raw_lines(m));
  ASSERT_EQ(t.o.exit_code, 0) << describe(t.o);
  ASSERT_TRUE(t.doc.is_object()) << describe(t.o);

  const json* ar = row(t.doc, "allreduce", 8);
  ASSERT_NE(ar, nullptr);
  EXPECT_NEAR((*ar)["cpu_rt_ns_podnet"].get<double>(), 105, 1e-9);
  EXPECT_NEAR((*ar)["cpu_rt_ns_best_anchor"].get<double>(), 490, 1e-9);
  EXPECT_TRUE((*ar)["cpu_modes_differ"].get<bool>());
  EXPECT_TRUE((*ar)["pass"].get<bool>());

  const json* ag = row(t.doc, "allgather", MiB);
  ASSERT_NE(ag, nullptr);
  EXPECT_TRUE((*ag)["cpu_modes_differ"].get<bool>());
  EXPECT_FALSE((*ag)["pass"].get<bool>());

  const json* aa = row(t.doc, "alltoall", 32);
  ASSERT_NE(aa, nullptr);
  EXPECT_FALSE((*aa)["cpu_modes_differ"].get<bool>());
  const json* bc = row(t.doc, "broadcast", MiB);  // no readings: not marked
  ASSERT_NE(bc, nullptr);
  EXPECT_TRUE((*bc)["cpu_rt_ns_podnet"].is_null());
  EXPECT_FALSE((*bc)["cpu_modes_differ"].get<bool>());

  // The verdicts are the same as without the readings.
  EXPECT_EQ(t.doc["pass"], 3);
  EXPECT_EQ(t.doc["fail"], 1);
  EXPECT_EQ(t.doc["rows_cpu_modes_differ"], 2);
  EXPECT_EQ(t.doc["fail_cpu_modes_differ"], 1);
  EXPECT_NE(t.o.out.find("cpu 105/490 ns MODES DIFFER"), std::string::npos) << t.o.out;
  EXPECT_NE(t.o.out.find("cpu 100/120 ns"), std::string::npos) << t.o.out;
  EXPECT_NE(t.o.out.find(": 2 rows (1 FAIL)"), std::string::npos) << t.o.out;
}

TEST(CompareLab, GlooAllreduceAgainstPodnetInPlaceOpenMpiOutOfPlace) {
  const uint64_t MiB = 1 << 20;
  json raw = json::array({
      // 16 MiB: podnet 0.95 of the link out of place, 0.85 in place; Gloo's ring 0.90 (in
      // place only) -> 0.85 / 0.90 = 0.944, a FAIL that out of place (1.056) would hide.
      lab_podnet("allreduce", 16 * MiB, 0.95, 0.85),
      lab_anchor("gloo", "allreduce_ring_chunked", "allreduce", 16 * MiB, 0.90),
      lab_anchor("gloo", "allreduce_halving_doubling", "allreduce", 16 * MiB, 0.80),
      lab_anchor("mpi", "", "allreduce", 16 * MiB, 0.50),
      // 1 MiB: Open MPI 0.82 against podnet out of place 0.80 -> 0.976 (in place, 0.90, must
      // not count for Open MPI).
      lab_podnet("allreduce", MiB, 0.80, 0.90),
      lab_anchor("gloo", "allreduce_ring_chunked", "allreduce", MiB, 0.85),
      lab_anchor("mpi", "", "allreduce", MiB, 0.82),
      // 4 MiB: in place 0.95 against Gloo 0.90, out of place 0.70 against Open MPI 0.60: 1.056.
      lab_podnet("allreduce", 4 * MiB, 0.70, 0.95),
      lab_anchor("gloo", "allreduce_ring_chunked", "allreduce", 4 * MiB, 0.90),
      lab_anchor("mpi", "", "allreduce", 4 * MiB, 0.60),
      // allgather has no target; Gloo's exists out of place: 0.9 / 0.8.
      lab_podnet("allgather", 16 * MiB, 0.90, 0.50),
      lab_anchor("gloo", "allgather", "allgather", 16 * MiB, 0.80),
  });
  json doc = {{"benchmark", "compare_lab"}, {"rate_bps", 1000000000}, {"raw", raw}};
  Table t = table_of(doc.dump(), "compare_lab.sh");
  ASSERT_EQ(t.o.exit_code, 0) << describe(t.o);
  ASSERT_TRUE(t.doc.is_object()) << describe(t.o);

  const json* big = row(t.doc, "allreduce", 16 * MiB);
  ASSERT_NE(big, nullptr);
  EXPECT_NEAR((*big)["ratio"].get<double>(), 0.85 / 0.90, 1e-6);
  EXPECT_EQ((*big)["best_anchor"], "gloo_ring_chunked");
  EXPECT_NEAR((*big)["ratios"]["mpi"].get<double>(), 0.95 / 0.50, 1e-6);
  EXPECT_NEAR((*big)["podnet_link_frac"].get<double>(), 0.95, 1e-6);
  EXPECT_FALSE((*big)["pass"].get<bool>());

  const json* one = row(t.doc, "allreduce", MiB);
  ASSERT_NE(one, nullptr);
  EXPECT_NEAR((*one)["ratio"].get<double>(), 0.80 / 0.82, 1e-6);
  EXPECT_EQ((*one)["best_anchor"], "mpi");
  EXPECT_FALSE((*one)["pass"].get<bool>());

  const json* four = row(t.doc, "allreduce", 4 * MiB);
  ASSERT_NE(four, nullptr);
  EXPECT_NEAR((*four)["ratio"].get<double>(), 0.95 / 0.90, 1e-6);
  EXPECT_TRUE((*four)["pass"].get<bool>());

  const json* ag = row(t.doc, "allgather", 16 * MiB);
  ASSERT_NE(ag, nullptr);
  EXPECT_NEAR((*ag)["ratio"].get<double>(), 0.90 / 0.80, 1e-6);
  EXPECT_TRUE((*ag)["pass"].is_null());  // reported without a target

  EXPECT_EQ(t.doc["pass"], 1);
  EXPECT_EQ(t.doc["fail"], 2);
  EXPECT_NE(t.o.out.find("# allreduce targets: 1 PASS, 2 FAIL"), std::string::npos) << t.o.out;
}

TEST(CompareTables, AMissingFileIsNamed) {
  for (const char* name : {"compare_coll.sh", "compare_lab.sh"}) {
    Outcome o = run_program("bash", {script(name), "--table-from", "/nonexistent/raw.json"}, {}, {}, 60);
    EXPECT_EQ(o.exit_code, 1) << name << ": " << describe(o);
    EXPECT_NE(o.err.find("/nonexistent/raw.json"), std::string::npos) << name << ": " << describe(o);
  }
}

}  // namespace
