#include "coll/tuner.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/config.h"
#include "base/log.h"

namespace podnet::detail {

const std::vector<std::string_view>& algorithms_for(Collective c) {
  static const std::vector<std::string_view> kAllreduce{"ring", "recursive_doubling", "rabenseifner", "tree",
                                                        "one_shot", "shm", "cma"};
  static const std::vector<std::string_view> kBroadcast{"binomial", "chain", "shm"};
  static const std::vector<std::string_view> kAllgather{"ring", "recursive_doubling", "bruck", "linear", "shm", "cma"};
  static const std::vector<std::string_view> kReduceScatter{"ring", "recursive_halving", "shm"};
  static const std::vector<std::string_view> kAlltoall{"pairwise", "bruck", "linear", "shm", "cma"};
  static const std::vector<std::string_view> kBarrier{"dissemination", "shm"};
  static const std::vector<std::string_view> kReduce{"binomial", "shm"};
  static const std::vector<std::string_view> kLinear{"linear", "shm"};
  static const std::vector<std::string_view> kRing{"ring"};
  static const std::vector<std::string_view> kPairwise{"pairwise"};
  static const std::vector<std::string_view> kDirect{"direct"};
  switch (c) {
    case Collective::kAllreduce: return kAllreduce;
    case Collective::kBroadcast: return kBroadcast;
    case Collective::kAllgather: return kAllgather;
    case Collective::kReduceScatter: return kReduceScatter;
    case Collective::kAlltoall: return kAlltoall;
    case Collective::kBarrier: return kBarrier;
    case Collective::kReduce: return kReduce;
    case Collective::kAllgatherv: return kRing;
    case Collective::kAlltoallv: return kPairwise;
    case Collective::kSendRecv: return kDirect;
    default: return kLinear;
  }
}

namespace {
Result<Collective> collective_by_name(std::string_view name) {
  for (int i = 1; i <= static_cast<int>(Collective::kSendRecv); ++i)
    if (collective_name(static_cast<Collective>(i)) == name) return static_cast<Collective>(i);
  return Status::InvalidArgument("unknown collective '{}'", name);
}
}  // namespace

Result<TuneTable> parse_tune_table(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument("tuner table is not a JSON object");
  TuneTable t;
  if (!j.contains("nranks") || !j["nranks"].is_number_integer() || !j.contains("entries") || !j["entries"].is_array())
    return Status::InvalidArgument("tuner table needs \"nranks\" (integer) and \"entries\" (array)");
  t.nranks = j["nranks"].get<int>();
  for (const auto& e : j["entries"]) {
    if (!e.is_object() || !e.contains("collective") || !e["collective"].is_string() || !e.contains("max_bytes") ||
        !e["max_bytes"].is_number_unsigned() || !e.contains("algorithm") || !e["algorithm"].is_string())
      return Status::InvalidArgument("tuner entry {} lacks collective, max_bytes or algorithm", e.dump());
    PODNET_ASSIGN_OR_RETURN(Collective c, collective_by_name(e["collective"].get<std::string>()));
    std::string algo = e["algorithm"].get<std::string>();
    PODNET_RETURN_IF_ERROR(validate_algorithm(c, algo));
    t.entries.push_back({c, e["max_bytes"].get<uint64_t>(), algo});
  }
  std::stable_sort(t.entries.begin(), t.entries.end(), [](const TuneEntry& a, const TuneEntry& b) {
    return a.coll != b.coll ? a.coll < b.coll : a.max_bytes < b.max_bytes;
  });
  return t;
}

std::string format_tune_table(const TuneTable& t) {
  nlohmann::json j;
  j["version"] = 1;
  j["nranks"] = t.nranks;
  j["entries"] = nlohmann::json::array();
  for (const auto& e : t.entries)
    j["entries"].push_back({{"collective", collective_name(e.coll)}, {"max_bytes", e.max_bytes},
                            {"algorithm", e.algorithm}});
  return j.dump(2) + "\n";
}

const TuneTable* loaded_tune_table() {
  static std::once_flag once;
  static std::optional<TuneTable> table;
  std::call_once(once, [] {
    const std::string& path = config().tuner_file;
    if (path.empty()) return;
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in) {
      PODNET_WARN(kColl, "PODNET_TUNER_FILE='{}' cannot be read; using the built-in table", path);
      return;
    }
    auto t = parse_tune_table(ss.str());
    if (!t.ok()) {
      PODNET_WARN(kColl, "PODNET_TUNER_FILE='{}': {}; using the built-in table", path, t.status().message());
      return;
    }
    table = std::move(t).value();
    PODNET_INFO(kColl, "tuner table {} ({} entries, measured on {} ranks)", path, table->entries.size(),
                table->nranks);
  });
  return table ? &*table : nullptr;
}

std::string_view choose_algorithm(Collective c, size_t bytes, int n, bool slow_links, bool oversubscribed,
                                  bool over_shm) {
  if (const TuneTable* t = loaded_tune_table(); t != nullptr && t->nranks == n) {
    const TuneEntry* last = nullptr;
    for (const auto& e : t->entries) {
      if (e.coll != c) continue;
      last = &e;
      if (bytes <= e.max_bytes) return e.algorithm;
    }
    if (last != nullptr) return last->algorithm;  // larger than anything measured
  }
  if (slow_links) {
    // Measured with `podnet tune` in labs of 4 and 8 hosts at 1 Gbit/s (docs/collectives.md):
    // the link, not the copies, is the cost, so above 16 KiB the ring's pipeline (every byte
    // over each link about once, all links busy all the time) wins; rabenseifner, which the
    // loopback table picks up to 1 MiB, sends as many bytes but in bursts that leave links idle.
    switch (c) {
      case Collective::kAllreduce:
        return bytes <= (16u << 10) ? "recursive_doubling" : "ring";
      case Collective::kBroadcast:
        return bytes <= 4096 || n <= 2 ? "binomial" : "chain";
      case Collective::kAllgather:
        // Not linear: n-1 flows at once into each shaped link lose to the ring's one (4 hosts
        // at 1 Gbit/s, two rounds: 4 MiB 38.0-38.8 against 32.5-33.7 ms, 64 MiB 273-293
        // against 217-218 ms).
        return bytes <= (16u << 10) && n > 2 ? "bruck" : "ring";
      case Collective::kAlltoall:
        // Large blocks: one peer per step (each link carries one flow each way) instead of
        // every block at once, whose n-1 flows into each receiver's shaped link overflow its
        // queue (8 hosts at 1 Gbit/s, 64 MiB: 82 drops and 2 877 retransmissions against 0 and
        // 7). Two interleaved rounds, out of place: 8 hosts 64 MiB 576-620 against 707-843 ms,
        // 16 MiB 159-180 against 188-194, 4 MiB (512 KiB blocks) 42-48 against 48-53; 4 hosts
        // 64 MiB 534-540 against 653-684, 16 MiB 128-142 against 146-175; even below.
        if (bytes >= (512u << 10)) return "pairwise";
        break;
      default:
        break;  // the others: the loopback choices measured as well as any in the lab
    }
  }
  // More ranks than CPUs on one host: a chain's hops cannot run at the same time, and each
  // waits for a descheduled rank; the binomial tree's log2(n) rounds win at every size (4
  // ranks on 2 CPUs, four interleaved rounds each: shm 16 MiB 5.3-5.9 against 6.6-7.8 ms,
  // tcp 64 MiB 49.7-50.3 against 51.3-56.5 ms; docs/collectives.md).
  if (oversubscribed && c == Collective::kBroadcast) return "binomial";
  // Likewise allreduce above 1 MiB on a power-of-two count: rabenseifner's 2 log2(n) steps
  // against the ring's 2(n-1), same bytes (4 ranks on 2 CPUs, three interleaved rounds: shm
  // 16 MiB 15.7-16.7 against 18.3-20.7 ms, tcp 4 MiB 5.8-6.3 against 8.0-8.6 ms; 8 ranks
  // shm 16 MiB 40.8-41.7 against 43.3-43.4 ms). On 3 ranks the ring stayed ahead.
  if (oversubscribed && c == Collective::kAllreduce && n > 2 && (n & (n - 1)) == 0 && bytes > (1u << 20))
    return "rabenseifner";
  // Measured on loopback TCP (bench/coll notes): latency-bound sizes want few dependent
  // rounds; bandwidth-bound sizes want every byte to cross each link about once.
  switch (c) {
    case Collective::kAllreduce:
      // Two ranks, one tcp stream each way (2026-11-30): one_shot 10-14 us vs the ring's
      // 14-21 up to 32 KiB, even at 64 KiB, 53-59 vs 38-40 at 128 KiB (it was one_shot up to
      // 256 KiB when loopback had 4 streams).
      // From 16 MiB on two ranks, rabenseifner (each half in one message) beats the ring's
      // chunk pipeline (four interleaved rounds, out of place: shm 16 MiB 4.5-4.8 against
      // 4.7-5.2 ms, 64 MiB 27.4-28.2 against 30.1-33.0; tcp 16 MiB 9.0-9.7 against 10.4-10.7,
      // 64 MiB 37-39 against 48-52). At 4 MiB shm still wants the ring (0.77-0.90 against
      // 0.97-1.04 ms). Over tcp, since both directions share one connection, rabenseifner
      // wins from 1 MiB (four interleaved rounds, out of place / in place: 1 MiB 344-500 /
      // 277-356 us against the ring's 428-557 / 405-487, 4 MiB 1.60-2.30 / 1.40-1.76 ms
      // against 2.00-2.52 / 1.84-2.10), and from 512 KiB (three interleaved rounds on
      // 2026-11-30: 251-271 / 224-263 us against 300-324 / 262-286; at 256 KiB the ring
      // stays ahead or even, 139-152 / 129-142 against 150-175 / 140-149).
      if (n <= 2) {
        if (bytes <= (64u << 10)) return "one_shot";
        return bytes < (over_shm ? (16u << 20) : (512u << 10)) ? "ring" : "rabenseifner";
      }
      // One shot sends n-1 messages per rank, recursive doubling log2(n): on a crowded host
      // every message's system call takes CPU from a rank someone waits for (over tcp, three
      // interleaved rounds, 8 B-2 KiB: 4 ranks on 2 CPUs 23.7-32.4 us against 30.4-41.3,
      // 8 ranks 81-100 against 141-198).
      if (bytes <= 4096 && n <= 8 && !oversubscribed) return "one_shot";
      if (bytes <= (64u << 10)) return "recursive_doubling";
      if (bytes <= (1u << 20)) return "rabenseifner";
      return "ring";
    case Collective::kBroadcast:
      return bytes <= (256u << 10) || n <= 2 ? "binomial" : "chain";
    case Collective::kAllgather: {
      // On two ranks both are one exchange, and bruck adds a local rotation (tcp 8 B-8 KiB
      // 4.6-5.8 vs 4.8-6.2 us; shm 16 KiB blocks 3.2 vs 5.4 us).
      // More ranks, past bruck's range: every block to every peer at once, one round instead
      // of the ring's n-1 (4 ranks on 2 CPUs, four interleaved rounds, out of place: shm
      // 512 KiB 100-148 against 158-222 us, 1 MiB 245-316 against 298-400, 2 MiB 443-486
      // against 498-880, 4 MiB 842-980 against 961-1292; 3 and 8 ranks ahead or even; tcp
      // 4 ranks 1 MiB 542-702 against 736-850 us, even from 4 MiB).
      // Up to 16 KiB blocks, log2(n) rounds; on a power of two recursive doubling makes the
      // same exchanges as bruck without its final rotation of the whole output (tcp, three
      // interleaved rounds, 4 KiB / 8 KiB / 16 KiB blocks: 4 ranks 27-36 / 32-35 / 43-51 us
      // against 30-45 / 34-55 / 47-58, 8 ranks 120-155 / 127-141 / 207-230 against 131-175
      // / 160-168 / 278-337; even below 4 KiB).
      // Over tcp since loopback connections run reno (2026-12-03, PODNET_TCP_CONGESTION):
      // on a power of two, recursive doubling past 16 KiB blocks too, on 4 ranks at every
      // size and on more from 1 MiB in all (three interleaved rounds, 4 ranks on 2 CPUs, out
      // of place, 32 / 128 / 512 KiB / 2 / 8 / 32 MiB in all: 25-34 / 52-99 / 242-464 us /
      // 0.76-1.18 / 3.06-3.10 / 16.2-17.9 ms against linear's 39-122 / 78-81 / 501-525 us /
      // 1.02-1.17 / 3.22-3.81 / 17.8-18.6 ms; 8 ranks, two rounds, 256 KiB / 1 / 4 / 16 MiB
      // 637-840 us / 1.90-2.05 / 5.14-5.43 / 22.3-22.8 ms against 521-604 us / 2.18-2.21 /
      // 7.69-7.74 / 29.4-29.5 ms). With the host's BBR linear was ahead or even (4 ranks,
      // two rounds: 512 KiB 179-291 against 215-299 us, 8 MiB 5.06-5.10 against 4.65-5.05
      // ms). Over shm without cross-memory attach, linear as measured before.
      if (n <= 2) return "ring";
      const bool pow2 = (n & (n - 1)) == 0;
      if (pow2 && !over_shm && (n <= 4 || bytes * n >= (1u << 20))) return "recursive_doubling";
      if (bytes > (16u << 10)) return "linear";
      return pow2 ? "recursive_doubling" : "bruck";
    }
    case Collective::kReduceScatter:
      // Up to 64 KiB in all on a power of two past 2 ranks, recursive halving's log2(n) rounds
      // against the ring's n-1 (over tcp, two interleaved rounds, out of place, 1-64 KiB in
      // all: 4 ranks on 2 CPUs 22-52 us against 36-65, 8 ranks 73-171 against 155-417; at
      // 256 KiB the ring is even or ahead: 179-184 against 178-230 on 4 ranks, 555-579
      // against 693-797 on 8). On 2 ranks both are one exchange.
      if (n > 2 && (n & (n - 1)) == 0 && bytes * static_cast<size_t>(n) <= (64u << 10)) return "recursive_halving";
      return "ring";
    case Collective::kAlltoall:
      // Bruck's log2(n) messages per rank instead of n-1 pay for its extra copies up to larger
      // blocks on a crowded host (tcp, three interleaved rounds: 4 ranks on 2 CPUs, 512 B
      // blocks 24-30 us against 32-47, 4 KiB 33-49 against 37-47; 8 ranks, 2 KiB blocks
      // 120-140 against 167-188, 8 KiB 257-321 against 219-244).
      return n > 2 && bytes <= (oversubscribed ? 2048u : 1024u) ? "bruck" : "linear";
    default:
      return algorithms_for(c).front();
  }
}

bool cma_beyond_arena(Collective c, int n, bool cma_cheap) {
  // allreduce on 2 ranks where cross-memory copies are cheap (arena_crossover).
  if (c == Collective::kAllreduce) return cma_cheap && n <= 2;
  // 2026-11-30, three interleaved rounds, out of place, against the next best: allgather on
  // 2 ranks 8 KiB 1.5 us against the arena's 1.7, 32 KiB 2.3 against the ring's 4.4-5.7,
  // 512 KiB 19.7-21.9 against 21.5-22.4, even from 2 MiB; on 4 ranks 512 KiB 75-140
  // against the arena's 96-104 and linear's 93-159, 1 MiB 205-283 against 219-329, even
  // from 2 MiB. alltoall on 4 ranks 128 KiB 22-32 against the arena's 28-39, 256 KiB
  // 35-55 against linear's 44-101, 512 KiB 87-154 against 104-128; on 2 ranks even with
  // linear or a little ahead (128 KiB 6.0-7.9 against 6.8-7.0). Larger allgather blocks go
  // back to the arena (arena_parts_from); allreduce stays in it (arena_crossover).
  return c == Collective::kAllgather || c == Collective::kAlltoall;
}

size_t arena_parts_from(Collective c, int n, bool cma) {
  // allgather blocks from 1 MiB on more than 2 ranks: the arena's parts (a copy into the
  // own slot, copies out of the peers' slots, all within cache-sized pieces) against one
  // cross-memory transfer per peer, which pins and copies a page at a time (2026-12-02,
  // interleaved rounds, out of place, -n 10 -w 2 as bench/compare_coll.sh runs them: 4
  // ranks on 2 CPUs, 4 / 16 / 64 MiB in all 0.59-0.86 / 3.27-3.34 / 12.9-14.5 ms against
  // 0.88-0.99 / 4.5-5.7 / 23.0-24.0 when "cma" read the peers' inputs; since it writes
  // into their outputs, 16 / 64 MiB 4.1-11.5 / 16.6-20.7 against 6.1-6.5 / 19.8-22.4).
  // Two ranks: "cma" writing, at every size (4 / 16 / 64 MiB 223-251 us / 1.94-2.12 /
  // 9.96-10.44 ms against the parts' 317-319 us / 2.46-2.60 / 10.03-10.33). Without direct
  // reads the parts beat the transport's ring over shm (2 ranks, PODNET_SHM_CMA=0, two
  // rounds: 4 / 16 MiB 210-247 us / 1.09-1.34 ms against 294-389 us / 1.90-2.57 ms), so
  // the 1 MiB holds there on 2 ranks too. alltoall: no such size out of place (4 ranks far
  // behind: 64 parts of 128 KiB blocks, each a round of 4 ranks on 2 CPUs); in place see
  // CommImpl::alltoall.
  if (c != Collective::kAllgather) return SIZE_MAX;
  return n <= 2 && cma ? SIZE_MAX : size_t{1} << 20;
}

size_t arena_crossover(Collective c, int n, bool cma, bool cma_cheap, bool split) {
  // Two ranks: one CMA copy per step makes the transport's ring hard to beat from a few
  // blocks up; more ranks: the ring's n-1 steps cost more, the arena's reads do not wait.
  constexpr size_t K = 1024;
  switch (c) {
    case Collective::kAllreduce:
      // Every size (the arena takes large vectors in slot-sized parts, each rank reducing
      // its block of each): 4 ranks on 2 CPUs, out of place, 512 KiB 270-319 us against
      // rabenseifner's 322-342 (the arena before its split reduction: 443-459), 4 MiB
      // 2.0-2.3 against 2.6-2.7 ms, 16 MiB 9.7-12.2 against 15.6-15.7; 3 and 8 ranks
      // likewise (the direct reads, algorithm "cma", even with it). Two ranks (2026-12-02,
      // against "cma", which had taken over from 512 KiB): two interleaved rounds with -n
      // 200, 256 KiB / 512 KiB / 1 / 2 MiB 32-33 / 62-65 / 129 / 258-267 us against 54-58 /
      // 97-99 / 186-188 / 341-362; two with -n 10 -w 2, 1 / 4 / 16 / 64 MiB 156-161 us /
      // 504-510 us / 2.41-2.61 ms / 10.6-11.1 ms against 187-197 / 763-775 / 3.36-3.73 /
      // 14.4-14.5.
      // Where cross-memory copies are cheap (2026-12-03, another VM: Arena::cma_cheap()),
      // two ranks move to "cma" past 128 KiB: two interleaved rounds, -n 500, 128 / 256 KiB
      // 20.7-21.0 / 41.1-41.7 us in the arena against 31.9-34.3 / 32.1-32.6; -n 200, 512 KiB /
      // 1 / 2 / 4 MiB 93-94 / 203-206 / 415-417 / 832-835 against 62 / 150-152 / 342-348 /
      // 677-693 (Open MPI 77-79 / 188-191 / 429-440 / 862-868). More ranks stay in the
      // arena (4 ranks, 64 KiB / 1 / 4 / 16 MiB: 22-24 us / 0.40-0.44 / 1.68-1.71 / 8.7-8.9 ms
      // against 51-54 us / 0.49-0.52 / 1.79-1.94 / 8.0-9.5 ms).
      return cma && cma_cheap && n <= 2 ? 128 * K : SIZE_MAX;
    case Collective::kReduce:
      // Two ranks whose transport splits its sends: the binomial tree from 256 KiB
      // (2026-12-06, two interleaved rounds, -n 300 -w 30, out of place / in place: 256 KiB
      // 37.8-38.5 / 30.5-30.6 us against the arena's 38.3-45.2 / 37.5-41.4; 128 KiB the
      // arena, 18.0-20.1 / 17.5-20.1 against 21.4-22.3 / 18.3-19.0).
      return n <= 2 ? (split ? 128 * K : 256 * K) : 128 * K;
    case Collective::kReduceScatter:
      // 2026-12-06, on 2 CPUs, the arena against the ring, two interleaved rounds each, out
      // of place / in place, n blocks in all: 3 ranks 192 KiB 38.9-39.2 / 37.5-38.2 us
      // against 46.1-52.2 / 44.3-49.4, 384 KiB 93-97 / 88-89 against 70-81 / 67-84; 4 ranks
      // 192 KiB 43-48 / 42-45 against 56-65 / 53-65, 256 KiB 65-68 / 62-68 against 73-75 /
      // 71-76, 384 / 512 KiB the ring ahead (88-98 / 138-140 against 103-111 / 156-166 out
      // of place); 8 ranks 384 / 512 KiB 257-268 / 339-346 against 358-369 / 415-434. It was
      // 128 KiB on more ranks. 2 ranks: 256 KiB even (25-26 against 26-27), 512 KiB the ring.
      return n <= 4 ? 256 * K : 512 * K;
    case Collective::kBroadcast:
      // Two ranks whose transport splits its sends past 64 KiB (each side copies half: the
      // binomial tree is then one send on two cores): from 128 KiB (2026-12-06, three
      // interleaved rounds, -n 500 -w 50, out of place / in place: 128 / 256 / 512 KiB
      // 10.5-10.8 / 6.6-7.0, 18.5-19.5 / 10.4-11.1, 36.5-38.7 / 17.9-18.7 us against the
      // arena's 11.1-13.4 / 8.5-9.0, 19.8-25.3 / 15.5-19.7, 45.7-61.1 / 31.2-41.1; 64 KiB
      // even, 6.4-6.5 / 4.4-4.7 against 6.1-7.4 / 4.3-4.9). Before the split copies started
      // at 64 KiB (1 MiB until then) the arena was ahead up to 512 KiB.
      return split && n <= 2 ? 64 * K : 512 * K;
    case Collective::kAllgather:
      // Two ranks, since the ring publishes a record with one cache-line transfer
      // (2026-11-30): 16 KiB blocks 3.2 us by the ring against 4.6 through the arena.
      // With direct reads next, 2 ranks up to 128 KiB blocks since the arena's buffers are
      // written ahead (2026-12-02, two interleaved rounds, -n 500, against "cma", out of
      // place: 8 / 32 / 128 KiB in all, i.e. 4 / 16 / 64 KiB blocks, 0.6-1.2 / 1.7-2.0 /
      // 5.0-6.1 us against 3.4-3.5 / 4.2-4.3 / 6.6-7.0; 512 KiB 22-24 against 21-22; it
      // was 2 KiB blocks, from 1.5 against 1.7 us at 8 KiB on 2026-11-30). More ranks: 4
      // ranks 512 KiB (128 KiB blocks) 58-71 us against 108-114.
      // Where cross-memory copies are cheap (2026-12-03, Arena::cma_cheap()), 2 ranks from
      // 8 KiB blocks: two rounds, -n 2000, 8 / 16 / 32 / 64 / 128 KiB in all 1.22-1.24 /
      // 2.07-2.10 / 3.8-4.0 / 6.1-6.2 / 12.2-12.4 us in the arena against 1.18-1.20 /
      // 1.35-1.37 / 1.66-1.67 / 2.77-2.78 / 4.35-4.38 (Open MPI 128 KiB 5.1-5.7); 4 ranks
      // even at 128 KiB (17.7 against 17.2), so 128 KiB stays there.
      if (cma && cma_cheap) return n <= 2 ? 4 * K : 128 * K;
      return n <= 2 ? (cma ? 128 * K : 8 * K) : 128 * K;
    case Collective::kGather:
      // Two ranks, 32 KiB blocks (2026-12-06, two interleaved rounds, -n 300 -w 30, out of
      // place / in place): 4.7-4.8 / 4.5-4.6 us through the arena against 7.9 / 4.7-5.0 by
      // linear (eager sends); 64 KiB blocks linear, 6.2 / 4.4 against 9.5-10.4 / 9.1-10.2.
      return n <= 2 ? 32 * K : 128 * K;
    case Collective::kAlltoall:
      // More ranks, four interleaved rounds on 4 ranks (2026-11-30): 128 KiB 28.7-43.1 us
      // through the arena against 32.8-64.8 by the transport's linear exchange (in place
      // 28.6-39.4 against 40.2-54.3); at 256 KiB the exchange wins out of place. Two ranks
      // (three interleaved rounds, out of place): 16 KiB blocks 3.0-3.4 us by the exchange
      // against 4.0-4.2 through the arena, 8 KiB even (2.3-2.6 both). With direct reads
      // next (2026-12-02, two interleaved rounds, out of place, against "cma"): 2 ranks the
      // arena, 32 / 128 / 512 KiB 0.9-1.1 / 3.1-3.4 / 19.8-20.9 us against
      // 4.1-5.4 / 6.5-6.6 / 20.5-31.7, so up to 256 KiB (512 KiB even, and in the
      // comparison that followed 28.7 against Open MPI's 25.0 us where "cma" had read 20.9
      // against 20.4); 4 ranks 128 KiB 26-39 against 51 us, 512 KiB 109-167 against
      // 112-113 (it was 64 KiB on more ranks). Past a slot the parts measured even with
      // "cma" on 2 ranks, far behind on 4 (arena_parts_from).
      // Where cross-memory copies are cheap (2026-12-03, Arena::cma_cheap()): 2 ranks, two
      // rounds, -n 1000, 16 / 32 / 64 / 128 / 256 KiB 1.47 / 2.21-2.22 / 4.2-4.4 / 9.0-9.5 /
      // 16.9 us in the arena against 1.43-1.57 / 1.86-1.96 / 2.77-2.83 / 4.4-4.5 / 7.7-7.8
      // (Open MPI 2.3 / 2.7 / 4.1 / 5.3 / 8.2); 4 ranks, -n 500, 32 / 64 / 128 / 256 KiB
      // 7.0-7.2 / 11.9-12.3 / 23.6-23.7 / 49-50 against 10.8-11.3 / 12.7-13.1 / 17.1-17.6 /
      // 25.8-27.7.
      // 2026-12-07 (the AMD VM, where the probe finds cross-memory copies dear): 2 ranks up
      // to 512 KiB, one slot. Three interleaved rounds, out of place, -n 200 -w 20: 512 KiB /
      // 1 / 2 MiB 27-46 / 54-97 / 118-162 us in the arena against 42-57 / 78-88 / 143-159 by
      // "cma" (Open MPI 40-51 / 70-84 / 135-160); the shm comparison table (-n 500) 38.0 /
      // 38.9 against 53.1 at 512 KiB. But 1 MiB in two parts as bench/compare_coll.sh runs
      // it, first of a sweep with -n 10 -w 2, read 160-179 against 147-160 (Open MPI
      // 147-162; three interleaved rounds), and from 4 MiB "cma" was ahead (-n 20 -w 2, 4 /
      // 8 MiB 336-494 / 761-1030 against 506-814 / 1209-1807).
      if (cma && cma_cheap) return n <= 2 ? 16 * K : 64 * K;
      return n <= 2 ? (cma ? 512 * K : 8 * K) : 128 * K;
    case Collective::kScatter:
      // More ranks (2026-12-06, on 2 CPUs, out of place / in place, n blocks in all, the
      // arena against linear): 4 ranks, three interleaved rounds, 128 KiB 8.4-8.8 / 7.5-7.9
      // us against 14.8-16.7 / 8.9-9.6, 256 KiB 16.9-17.6 / 15.8-16.4 against 13.3-14.8 /
      // 12.2-13.1; 3 ranks, two rounds, 128 KiB even (9.9-10.5 / 9.2-9.3 against
      // 10.6-11.2 / 8.6-9.6), 256 KiB 22-24 / 21-22 against 15-18 / 12-16; 8 ranks, two
      // rounds, 256 KiB 26-31 / 19-23 against 49-80 / 25-32, 512 KiB 48-56 / 38 against
      // 33-40 / 29-38. It was 64 KiB on more ranks.
      return n <= 2 ? 32 * K : n <= 4 ? 128 * K : 256 * K;
    case Collective::kBarrier:
      return SIZE_MAX;
    default:
      return 0;
  }
}

std::string_view canonical_name(Collective c, std::string_view name) {
  for (std::string_view a : algorithms_for(c))
    if (a == name) return a;
  return {};
}

Status validate_algorithm(Collective c, std::string_view name) {
  const auto& v = algorithms_for(c);
  if (std::find(v.begin(), v.end(), name) != v.end()) return {};
  std::string names;
  for (auto a : v) names += (names.empty() ? "" : ", ") + std::string(a);
  return Status::InvalidArgument("{} has no algorithm '{}' (available: {})", collective_name(c), name, names);
}

}  // namespace podnet::detail
