// `podnet bench p2p --all-pairs`: the point-to-point benchmark between every ordered pair of
// ranks, one pair at a time (so a pair's numbers are its link's, not a share of it), and a
// matrix that makes a slow host or link stand out: the median over each rank's pairs next to
// the median over all pairs.
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "bench_p2p.h"
#include "xfer/world.h"

namespace podnet::tool {
namespace {

// A rank whose median is this far from the pod's median is an outlier (bw: below it; latency:
// above its inverse).
constexpr double kOutlierRatio = 0.75;
// Without -n, each pair moves about this much in bw mode: the whole matrix of an 8-host pod at
// 1 Gbit/s then takes about half a minute.
constexpr uint64_t kPairBudget = 32ull << 20;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct RankSummary {
  double median = 0, ratio = 0;
  bool outlier = false;
};

// Per rank, the median over every pair it is part of (as sender or receiver), and its ratio
// to the pod's median: the median of those per-rank medians. (Not the median of all pairs: in
// a small pod the pairs of one slow host are a large share of them and would drag it down.)
// For latency the ratio is inverted, so that < 1 always means "worse".
std::vector<RankSummary> summarize(const P2pOptions& o, const P2pMatrix& m, double* pod_median) {
  const size_t n = m.value.size();
  std::vector<RankSummary> out(n);
  std::vector<double> medians;
  for (size_t r = 0; r < n; ++r) {
    std::vector<double> mine;
    for (size_t k = 0; k < n; ++k)
      if (k != r) {
        mine.push_back(m.value[r][k]);
        mine.push_back(m.value[k][r]);
      }
    out[r].median = median(mine);
    medians.push_back(out[r].median);
  }
  *pod_median = median(medians);
  for (size_t r = 0; r < n; ++r) {
    if (*pod_median > 0 && out[r].median > 0)
      out[r].ratio = o.mode == "bw" ? out[r].median / *pod_median : *pod_median / out[r].median;
    out[r].outlier = n > 2 && out[r].ratio < kOutlierRatio;
  }
  return out;
}

}  // namespace

Result<P2pMatrix> run_p2p_all_pairs(World& world, const P2pOptions& in) {
  const int n = world.size(), me = world.rank();
  if (n < 2) return Status::InvalidArgument("bench p2p --all-pairs needs at least 2 ranks");
  if (in.sizes.size() != 1) return Status::InvalidArgument("bench p2p --all-pairs measures one size (-s), not -a");
  P2pOptions o = in;
  if (o.iters <= 0 && o.mode == "bw")
    o.iters = static_cast<int>(std::clamp<uint64_t>(kPairBudget / std::max<uint64_t>(o.sizes[0], 1), 8, 5000));
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  auto& store = world.store();
  PODNET_RETURN_IF_ERROR(store.set(fmt::format("podnet/p2p/host/{}", me), host));
  for (int from = 0; from < n; ++from) {
    for (int to = 0; to < n; ++to) {
      if (from == to) continue;
      // One pair at a time: everybody waits for the previous pair to finish.
      PODNET_RETURN_IF_ERROR(world.barrier(fmt::format("podnet/p2p/pair/{}/{}", from, to)));
      if (me != from && me != to) continue;
      auto rows = run_p2p_pair(world, me == from ? to : from, me == from, o);
      if (!rows.ok()) return rows.status().with_context("pair {} -> {}", from, to);
      if (me == from) {
        const P2pRow& r = rows->front();
        double v = o.mode == "bw" ? r.gbits_per_s : r.t_typical;
        PODNET_RETURN_IF_ERROR(
            store.set(fmt::format("podnet/p2p/result/{}/{}", from, to), fmt::format("{} {} {}", v, r.iters, r.wrong)));
      }
    }
  }
  PODNET_RETURN_IF_ERROR(world.barrier("podnet/p2p/pairs-done"));
  P2pMatrix m;
  if (me != 0) return m;
  m.bytes = o.sizes[0];
  m.value.assign(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(n), 0.0));
  for (int r = 0; r < n; ++r) {
    PODNET_ASSIGN_OR_RETURN(std::string h, store.get(fmt::format("podnet/p2p/host/{}", r)));
    m.hosts.push_back(h);
  }
  for (int from = 0; from < n; ++from)
    for (int to = 0; to < n; ++to) {
      if (from == to) continue;
      PODNET_ASSIGN_OR_RETURN(std::string text, store.get(fmt::format("podnet/p2p/result/{}/{}", from, to)));
      double v = 0;
      int iters = 0;
      unsigned long long wrong = 0;
      if (std::sscanf(text.c_str(), "%lf %d %llu", &v, &iters, &wrong) != 3)
        return Status::Internal("bad pair result '{}'", text);
      m.value[static_cast<size_t>(from)][static_cast<size_t>(to)] = v;
      m.iters = iters;
      m.wrong += wrong;
    }
  return m;
}

void print_p2p_matrix(const P2pOptions& o, const P2pMatrix& m) {
  const bool bw = o.mode == "bw";
  const size_t n = m.value.size();
  fmt::print("# podnet bench p2p --all-pairs: {} {}, {} bytes x {} iterations per ordered pair, one pair at a time\n",
             o.op, bw ? "bandwidth" : "latency", m.bytes, m.iters);
  fmt::print("# {}; row: from (initiator), column: to (target){}\n",
             bw ? "Gb/s = 10^9 bit/s at remote completion"
                : fmt::format("t_typical in us (median; RTT/2 for send, write_notify, write; timer {})", p2p_timer_name()),
             o.check ? "; every payload verified" : "");
  fmt::print("{:>8}", "from\\to");
  for (size_t j = 0; j < n; ++j) fmt::print(" {:>8}", j);
  fmt::print("   host\n");
  for (size_t i = 0; i < n; ++i) {
    fmt::print("{:>8}", i);
    for (size_t j = 0; j < n; ++j)
      fmt::print(" {:>8}", i == j ? std::string("-") : fmt::format("{:.3f}", m.value[i][j]));
    fmt::print("   {}\n", m.hosts[i]);
  }
  double pod = 0;
  auto sum = summarize(o, m, &pod);
  fmt::print(
      "# per rank: median over its {} pairs (sent and received) and its ratio to the median of the ranks' "
      "medians ({:.3f}{})\n",
      2 * (n - 1), pod, bw ? " Gb/s" : " us");
  fmt::print("{:>8} {:>10} {:>8}   {}\n", "rank", bw ? "Gb/s" : "us", "ratio", "host");
  std::vector<std::string> outliers;
  for (size_t r = 0; r < n; ++r) {
    fmt::print("{:>8} {:>10.3f} {:>8.2f}   {}{}\n", r, sum[r].median, sum[r].ratio, m.hosts[r],
               sum[r].outlier ? "   <-- outlier" : "");
    if (sum[r].outlier) outliers.push_back(fmt::format("rank {} ({})", r, m.hosts[r]));
  }
  fmt::print("# outliers (ratio < {}): {}\n", kOutlierRatio,
             outliers.empty() ? "none" : fmt::format("{}", fmt::join(outliers, ", ")));
  std::fflush(stdout);
}

nlohmann::json p2p_matrix_json(const P2pOptions& o, const P2pMatrix& m) {
  double pod = 0;
  auto sum = summarize(o, m, &pod);
  nlohmann::json j{{"benchmark", "p2p_all_pairs"},
                   {"op", o.op},
                   {"mode", o.mode},
                   {"bytes", m.bytes},
                   {"iterations", m.iters},
                   {"check", o.check},
                   {"wrong", m.wrong},
                   {"unit", o.mode == "bw" ? "Gb/s" : "us"},
                   {"pod_median", pod},
                   {"outlier_ratio", kOutlierRatio}};
  if (o.mode != "bw") j["timer"] = p2p_timer_name();
  j["matrix"] = m.value;
  j["ranks"] = nlohmann::json::array();
  j["outliers"] = nlohmann::json::array();
  for (size_t r = 0; r < m.value.size(); ++r) {
    j["ranks"].push_back({{"rank", r},
                          {"host", m.hosts[r]},
                          {"median", sum[r].median},
                          {"ratio", sum[r].ratio},
                          {"outlier", sum[r].outlier}});
    if (sum[r].outlier) j["outliers"].push_back(r);
  }
  return j;
}

}  // namespace podnet::tool
