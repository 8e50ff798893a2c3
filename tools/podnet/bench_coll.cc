#include "bench_coll.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <set>
#include <type_traits>

#include "base/clock.h"
#include "coll/half.h"
#include "xfer/world.h"

namespace podnet::tool {

// ---- nccl-tests' conventions ----------------------------------------------------------

const std::vector<Collective>& bench_collectives() {
  static const std::vector<Collective> kAll{Collective::kAllreduce, Collective::kAllgather, Collective::kReduceScatter,
                                            Collective::kAlltoall,  Collective::kBroadcast, Collective::kReduce,
                                            Collective::kGather,    Collective::kScatter,   Collective::kBarrier};
  return kAll;
}

bool is_reducing(Collective c) {
  return c == Collective::kAllreduce || c == Collective::kReduce || c == Collective::kReduceScatter;
}

bool is_rooted(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather ||
         c == Collective::kScatter;
}

double busbw_factor(Collective c, int nranks) {
  const double n = nranks;
  switch (c) {
    case Collective::kAllreduce: return 2 * (n - 1) / n;
    case Collective::kAllgather:
    case Collective::kReduceScatter:
    case Collective::kAlltoall:
    case Collective::kGather:
    case Collective::kScatter: return (n - 1) / n;
    case Collective::kBroadcast:
    case Collective::kReduce: return 1;
    default: return 0;
  }
}

CollCounts coll_counts(Collective c, uint64_t bytes, size_t elem_size, int nranks) {
  const uint64_t count = bytes / elem_size, n = static_cast<uint64_t>(nranks);
  switch (c) {
    case Collective::kAllgather:
    case Collective::kGather: return {count / n, count / n, count / n * n};
    case Collective::kReduceScatter:
    case Collective::kScatter: return {count / n, count / n * n, count / n};
    case Collective::kAlltoall: return {count / n, count / n * n, count / n * n};
    case Collective::kBarrier: return {0, 0, 0};
    default: return {count, count, count};
  }
}

std::vector<uint64_t> sweep_sizes(const CollOptions& o) {
  std::vector<uint64_t> v;
  for (uint64_t s = o.min_bytes; s <= o.max_bytes;) {
    v.push_back(s);
    uint64_t next = 0;
    if (o.step_bytes > 0) next = s > UINT64_MAX - o.step_bytes ? s : s + o.step_bytes;
    else next = s > UINT64_MAX / o.step_factor ? s : s * o.step_factor;
    if (next <= s) break;  // -b 0 with a factor, or overflow
    s = next;
  }
  return v;
}

std::vector<CollCase> cases_for(Collective c, const CollOptions& o, int nranks) {
  if (c == Collective::kBarrier) return {CollCase{c, DataType::kUint8, ReduceOp::kSum, -1, 0}};
  std::vector<int> roots{-1};
  if (is_rooted(c)) {
    roots.clear();
    for (int r = 0; r < nranks; ++r)
      if (o.root < 0 || o.root == r) roots.push_back(r);
  }
  const std::vector<ReduceOp> ops = is_reducing(c) ? o.ops : std::vector<ReduceOp>{ReduceOp::kSum};
  const std::vector<uint64_t> sizes = sweep_sizes(o);
  std::vector<CollCase> out;
  for (DataType t : o.dtypes)
    for (ReduceOp op : ops)
      for (int root : roots)
        for (uint64_t bytes : sizes) out.push_back(CollCase{c, t, op, root, bytes});
  return out;
}

// ---- data pattern and reference ---------------------------------------------------------
// Inputs are small non-negative integers, so every type holds them exactly and every
// reduction is exact whatever order the algorithm combines them in: sums of 0..3 (exact in
// bfloat16 up to ~85 ranks), products of 1s and 2s (powers of two; integers wrap, floats
// reach inf exactly as the reference does), min/max of 0..99. Plain data (allgather,
// alltoall, ...) is 0..126, different per rank and index, so a misplaced block shows.

namespace {

uint64_t mix(int rank, uint64_t i) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(rank + 1) * 0xC2B2AE3D27D4EB4Full;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 32);
}

double data_value(int rank, uint64_t i) { return static_cast<double>(mix(rank, i) % 127); }

double input_value(const CollCase& c, int rank, uint64_t i) {
  if (!is_reducing(c.coll)) return data_value(rank, i);
  const uint64_t h = mix(rank, i);
  switch (c.op) {
    case ReduceOp::kProd: return h % 4 == 0 ? 2 : 1;
    case ReduceOp::kMin:
    case ReduceOp::kMax: return static_cast<double>(h % 100);
    default: return static_cast<double>(h % 4);  // sum, avg
  }
}

bool is_integer(DataType t) {
  return t != DataType::kFloat16 && t != DataType::kBfloat16 && t != DataType::kFloat32 && t != DataType::kFloat64;
}

// The reduction over every rank of element i, in double (exact for this pattern).
double reduced_value(const CollCase& c, int nranks, uint64_t i) {
  double acc = input_value(c, 0, i);
  for (int r = 1; r < nranks; ++r) {
    const double v = input_value(c, r, i);
    switch (c.op) {
      case ReduceOp::kProd: acc *= v; break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
      default: acc += v;
    }
  }
  if (c.op == ReduceOp::kAvg) acc = is_integer(c.type) ? std::trunc(acc / nranks) : acc / nranks;
  return acc;
}

// Load/store one element as a double. Integers wrap modulo 2^bits like the kernels do.
template <class T>
struct PlainCodec {
  using Elem = T;
  static double load(T v) { return static_cast<double>(v); }
  static T store(double d) {
    if constexpr (std::is_integral_v<T>) {
      const double m = std::fmod(d, 18446744073709551616.0);  // d is a non-negative integer
      return static_cast<T>(static_cast<uint64_t>(m));
    } else {
      return static_cast<T>(d);
    }
  }
};
struct HalfCodec {
  using Elem = uint16_t;
  static double load(uint16_t v) { return coll::half_to_float(v); }
  static uint16_t store(double d) { return coll::float_to_half(static_cast<float>(d)); }
};
struct Bf16Codec {
  using Elem = uint16_t;
  static double load(uint16_t v) { return coll::bfloat16_to_float(v); }
  static uint16_t store(double d) { return coll::float_to_bfloat16(static_cast<float>(d)); }
};

template <class F>
decltype(auto) with_codec(DataType t, F&& f) {
  switch (t) {
    case DataType::kInt8: return f(PlainCodec<int8_t>{});
    case DataType::kUint8: return f(PlainCodec<uint8_t>{});
    case DataType::kInt32: return f(PlainCodec<int32_t>{});
    case DataType::kUint32: return f(PlainCodec<uint32_t>{});
    case DataType::kInt64: return f(PlainCodec<int64_t>{});
    case DataType::kUint64: return f(PlainCodec<uint64_t>{});
    case DataType::kFloat16: return f(HalfCodec{});
    case DataType::kBfloat16: return f(Bf16Codec{});
    case DataType::kFloat32: return f(PlainCodec<float>{});
    case DataType::kFloat64: break;
  }
  return f(PlainCodec<double>{});
}

// p[k] = value(k) for k < n.
template <class F>
void fill(DataType t, std::byte* p, uint64_t n, F value) {
  with_codec(t, [&](auto codec) {
    using C = decltype(codec);
    for (uint64_t k = 0; k < n; ++k) {
      const typename C::Elem e = C::store(value(k));
      std::memcpy(p + k * sizeof e, &e, sizeof e);
    }
  });
}

// Elements k < n of p that differ from expected(k): exactly, or within a relative `tol`.
template <class F>
uint64_t count_wrong(DataType t, const std::byte* p, uint64_t n, double tol, F expected) {
  return with_codec(t, [&](auto codec) -> uint64_t {
    using C = decltype(codec);
    uint64_t bad = 0;
    for (uint64_t k = 0; k < n; ++k) {
      typename C::Elem e;
      std::memcpy(&e, p + k * sizeof e, sizeof e);
      const double got = C::load(e), want = expected(k);
      const bool ok = tol > 0 ? std::fabs(got - want) <= tol * std::fabs(want) : got == C::load(C::store(want));
      if (!ok) ++bad;
    }
    return bad;
  });
}

// A byte that no expected value is made of (0xA5A5... is negative or far out of range in
// every type), written over outputs before a checked call so that a missing write shows.
constexpr int kPoison = 0xA5;

}  // namespace

// ---- running ----------------------------------------------------------------------------

CollBench::~CollBench() = default;

Result<std::unique_ptr<CollBench>> CollBench::create(World& world, Communicator& comm, const CollOptions& o) {
  std::unique_ptr<CollBench> b(new CollBench(comm, o));
  // Both buffers hold max_bytes: no case needs more on either side (bench_coll.h).
  const size_t len = static_cast<size_t>((std::max<uint64_t>(o.max_bytes, 64) + 63) / 64 * 64);
  if (o.alloc) {
    // Zeroed, page-aligned; peers on this host may map them (docs/io-api.md).
    for (MemoryRegion* mr : {&b->send_mr_, &b->recv_mr_}) {
      auto got = world.context().allocate_memory(len, Access::kRemoteReadWrite);
      if (!got.ok()) return got.status().with_context("--alloc: allocating {} bytes", len);
      *mr = std::move(got).value();
    }
    b->send_ = b->send_mr_.data();
    b->recv_ = b->recv_mr_.data();
  } else {
    try {
      b->send_vec_.assign(len, std::byte{0});
      b->recv_vec_.assign(len, std::byte{0});
    } catch (const std::bad_alloc&) {
      return Status::Unavailable("cannot allocate two buffers of {} bytes (-e {}); try a smaller -e", len, o.max_bytes);
    }
    b->send_ = b->send_vec_.data();
    b->recv_ = b->recv_vec_.data();
  }

  // Header lines: every rank's pid and host, in fixed-size records.
  constexpr size_t kRecord = 128;
  char host[64] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string name = fmt::format("pid {} on {}", ::getpid(), host);
  std::vector<char> mine(kRecord, '\0'), all(kRecord * comm.size());
  std::memcpy(mine.data(), name.data(), std::min(name.size(), kRecord - 1));
  PODNET_RETURN_IF_ERROR(
      comm.allgather(mine.data(), all.data(), kRecord, DataType::kUint8).with_context("gathering rank names"));
  for (int r = 0; r < comm.size(); ++r) b->rank_lines_.emplace_back(all.data() + r * kRecord);

  std::set<std::string> names;
  for (int p = 0; p < world.size(); ++p) {
    if (p == world.rank()) continue;
    PODNET_ASSIGN_OR_RETURN(auto ep, world.peer(p));
    names.emplace(ep->transport());
  }
  std::string joined(names.empty() ? "-" : "");
  for (const std::string& n : names) {
    if (!joined.empty()) joined += '+';
    joined += n;
  }
  b->transport_ = std::move(joined);
  return b;
}

Status CollBench::launch(const CollCase& c, const CollCounts& n, bool in_place) {
  const size_t es = dtype_size(c.type);
  std::byte* s = send_;
  std::byte* r = recv_;
  const uint64_t p = n.param;
  std::byte* mine = r + static_cast<size_t>(comm_.rank()) * p * es;  // this rank's block, in place
  const DataType t = c.type;
  switch (c.coll) {
    case Collective::kAllreduce: return comm_.allreduce(in_place ? r : s, r, p, t, c.op);
    case Collective::kAllgather: return comm_.allgather(in_place ? mine : s, r, p, t);
    case Collective::kReduceScatter:
      return in_place ? comm_.reduce_scatter(r, mine, p, t, c.op) : comm_.reduce_scatter(s, r, p, t, c.op);
    case Collective::kAlltoall: return comm_.alltoall(in_place ? r : s, r, p, t);
    case Collective::kBroadcast:
      return in_place ? comm_.broadcast(r, p, t, c.root) : comm_.broadcast(s, r, p, t, c.root);
    case Collective::kReduce: return comm_.reduce(in_place ? r : s, r, p, t, c.op, c.root);
    case Collective::kGather: return comm_.gather(in_place ? mine : s, r, p, t, c.root);
    case Collective::kScatter:
      return in_place ? comm_.scatter(r, mine, p, t, c.root) : comm_.scatter(s, r, p, t, c.root);
    case Collective::kBarrier: return comm_.barrier();
    default: return Status::InvalidArgument("bench coll: {} is not benchmarked", collective_name(c.coll));
  }
}

namespace {

// Writes the poisoned outputs and the inputs of one call. In place, the one buffer holds
// max(send, recv) elements and the input sits where the collective's in-place form wants it.
void prepare(const CollCase& c, const CollCounts& n, bool in_place, int me, std::byte* send, std::byte* recv) {
  const size_t es = dtype_size(c.type);
  const uint64_t p = n.param;
  const bool rooted_input = c.coll == Collective::kBroadcast || c.coll == Collective::kScatter;
  const bool has_input = c.coll != Collective::kBarrier && (!rooted_input || me == c.root);
  std::memset(recv, kPoison, std::max(n.send, n.recv) * es);
  std::byte* in = send;
  if (in_place) {
    in = recv;
    if (c.coll == Collective::kAllgather || c.coll == Collective::kGather) in = recv + me * p * es;
  }
  if (has_input) fill(c.type, in, n.send, [&](uint64_t i) { return input_value(c, me, i); });
}

}  // namespace

Status CollBench::time_place(const CollCase& c, const CollCounts& n, bool in_place, double& seconds) {
  prepare(c, n, in_place, comm_.rank(), send_, recv_);
  for (int i = 0; i < o_.warmup; ++i) PODNET_RETURN_IF_ERROR(launch(c, n, in_place));
  PODNET_RETURN_IF_ERROR(comm_.barrier());
  const int64_t t0 = now_ns();
  for (int i = 0; i < o_.iters; ++i) PODNET_RETURN_IF_ERROR(launch(c, n, in_place));
  seconds = static_cast<double>(now_ns() - t0) / 1e9 / o_.iters;
  // Wait for the others before preparing the next measurement: a rank that finishes first
  // would otherwise fill the next buffers while the slowest is still in its last call, and on
  // a host with fewer cores than ranks that work lands in the slowest rank's time (8 lab hosts
  // on 2 cores: the last out-of-place 4 MiB allreduce took 62-73 ms instead of 61, measured
  // per call).
  return comm_.barrier();
}

Result<uint64_t> CollBench::check_place(const CollCase& c, const CollCounts& n, bool in_place) {
  const int me = comm_.rank(), nranks = comm_.size();
  prepare(c, n, in_place, me, send_, recv_);
  PODNET_RETURN_IF_ERROR(launch(c, n, in_place));
  const size_t es = dtype_size(c.type);
  const uint64_t p = n.param;
  const double tol = c.op != ReduceOp::kAvg || is_integer(c.type) || !is_reducing(c.coll) ? 0
                     : es == 2                                                              ? 1e-2
                                                                                            : 1e-6;
  const std::byte* out = recv_;
  auto data = [](int rank, uint64_t i) { return data_value(rank, i); };
  auto reduced = [&](uint64_t i) { return reduced_value(c, nranks, i); };
  switch (c.coll) {
    case Collective::kAllreduce: return count_wrong(c.type, out, p, tol, reduced);
    case Collective::kReduce: return me == c.root ? count_wrong(c.type, out, p, tol, reduced) : 0;
    case Collective::kBroadcast:
      return count_wrong(c.type, out, p, tol, [&](uint64_t k) { return data(c.root, k); });
    case Collective::kAllgather:
    case Collective::kGather:
      if (c.coll == Collective::kGather && me != c.root) return 0;
      return count_wrong(c.type, out, p * nranks, tol,
                         [&](uint64_t k) { return data(static_cast<int>(k / p), k % p); });
    case Collective::kReduceScatter:
      return count_wrong(c.type, in_place ? out + me * p * es : out, p, tol,
                         [&](uint64_t k) { return reduced(me * p + k); });
    case Collective::kScatter:
      return count_wrong(c.type, in_place ? out + me * p * es : out, p, tol,
                         [&](uint64_t k) { return data(c.root, me * p + k); });
    case Collective::kAlltoall:
      return count_wrong(c.type, out, p * nranks, tol,
                         [&](uint64_t k) { return data(static_cast<int>(k / p), me * p + k % p); });
    default: return 0;
  }
}

Result<CollRow> CollBench::measure(const CollCase& c) {
  const int nranks = comm_.size();
  const size_t es = dtype_size(c.type);
  CollRow row;
  row.c = c;
  const CollCounts n = coll_counts(c.coll, c.bytes, es, nranks);
  row.size = std::max(n.send, n.recv) * es;
  row.count = n.param;
  // Per place: seconds per call (reduced with max) and wrong elements (summed).
  double seconds[2] = {0, 0};
  uint64_t wrong[2] = {0, 0};
  for (int place = 0; place < 2; ++place) {
    const bool in_place = place == 1;
    auto where = [&] {
      return fmt::format("{} {}{}{} {} bytes {}", collective_name(c.coll), dtype_name(c.type),
                         is_reducing(c.coll) ? " " : "", is_reducing(c.coll) ? reduce_op_name(c.op) : "", row.size,
                         in_place ? "in place" : "out of place");
    };
    Status st = time_place(c, n, in_place, seconds[place]);
    if (!st.ok()) return st.with_context("{}", where());
    // Per place: the tuner may choose differently in place (alltoall does).
    (in_place ? row.in_place : row.out_of_place).algorithm = comm_.last_algorithm(c.coll);
    if (o_.check) {
      Result<uint64_t> bad = check_place(c, n, in_place);
      if (!bad.ok()) return bad.status().with_context("{} (checked call)", where());
      wrong[place] = *bad;
    }
  }
  // The slowest rank's time: a call is done when it is done everywhere. (nccl-tests averages
  // the ranks; here the leaves of a rooted collective can finish long before the root, since
  // small sends complete as soon as they are queued.)
  PODNET_RETURN_IF_ERROR(comm_.allreduce(seconds, seconds, 2, DataType::kFloat64, ReduceOp::kMax)
                             .with_context("reducing the times"));
  PODNET_RETURN_IF_ERROR(
      comm_.allreduce(wrong, wrong, 2, DataType::kUint64, ReduceOp::kSum).with_context("summing wrong counts"));
  const double factor = busbw_factor(c.coll, nranks);
  for (int place = 0; place < 2; ++place) {
    PlaceResult& r = place == 0 ? row.out_of_place : row.in_place;
    r.time_us = seconds[place] * 1e6;
    r.algbw = seconds[place] > 0 ? static_cast<double>(row.size) / 1e9 / seconds[place] : 0;
    r.busbw = r.algbw * factor;
    r.wrong = wrong[place];
  }
  return row;
}

}  // namespace podnet::tool
