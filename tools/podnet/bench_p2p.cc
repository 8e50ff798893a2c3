#include "bench_p2p.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>

#include "base/clock.h"
#include "base/cycle_clock.h"
#include "bench_buffer.h"
#include "telemetry/histogram.h"
#include "xfer/world.h"

namespace podnet::tool {
namespace {

constexpr uint64_t kCtrl = 1ull << 63;  // control messages between the two ranks
constexpr uint64_t kCtrlGo = kCtrl | 1, kCtrlDone = kCtrl | 2, kCtrlBatch = kCtrl | 3, kCtrlVerified = kCtrl | 4,
                   kCtrlKey = kCtrl | 5, kCtrlFinish = kCtrl | 6;
constexpr uint64_t kSlotBudget = 128ull << 20;  // bytes of buffer per side

// The payload of iteration `iter`: cheap to generate and to check, different per iteration.
void fill(std::byte* p, size_t n, uint64_t iter) {
  uint64_t x = iter * 0x9E3779B97F4A7C15ull + 0x1234567;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x += 0x9E3779B97F4A7C15ull;
    std::memcpy(p + i, &x, 8);
  }
  for (; i < n; ++i) p[i] = static_cast<std::byte>(iter + i);
}

bool matches(const std::byte* p, size_t n, uint64_t iter) {
  uint64_t x = iter * 0x9E3779B97F4A7C15ull + 0x1234567;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x += 0x9E3779B97F4A7C15ull;
    if (std::memcmp(p + i, &x, 8) != 0) return false;
  }
  for (; i < n; ++i)
    if (p[i] != static_cast<std::byte>(iter + i)) return false;
  return true;
}

// The operation, parsed once: the timed loops branch on it every iteration.
enum class Op { kWrite, kRead, kSend, kWriteNotify };
Op op_of(const std::string& name) {
  if (name == "write") return Op::kWrite;
  if (name == "read") return Op::kRead;
  if (name == "send") return Op::kSend;
  return Op::kWriteNotify;  // the CLI accepts nothing else
}

struct Ctx {
  World& world;
  const P2pOptions& o;
  Op op;
  std::shared_ptr<Endpoint> ep;
  BenchBuffer buf;  // slots * size (+ room for the largest size); unused with --alloc
  MemoryRegion mr;  // buf registered, or the allocated buffer (--alloc)
  std::byte* data() const { return mr.data(); }
  RemoteKey peer_key;
  std::chrono::milliseconds tmo;
  std::vector<std::byte> scratch;  // an expected payload (--check of the write ping-pong)
  const CycleClock* clock = nullptr;  // times each latency iteration (the initiator's)
};

Status ctrl_send(Ctx& c, uint64_t tag, uint64_t value) {
  return c.ep->send(&value, sizeof value, tag).wait(c.tmo).with_context("control message");
}

Result<uint64_t> ctrl_recv(Ctx& c, uint64_t tag) {
  uint64_t v = 0;
  Request r = c.ep->recv(&v, sizeof v, tag);
  PODNET_RETURN_IF_ERROR(r.wait(c.tmo).with_context("waiting for the peer's control message"));
  return v;
}

int iterations_for(const P2pOptions& o, uint64_t size) {
  int n = o.iters > 0 ? o.iters : (o.mode == "bw" ? 5000 : 1000);
  // Keep each size to about 2 GiB of traffic so `-a` ends in reasonable time.
  uint64_t cap = std::max<uint64_t>(8, (2ull << 30) / std::max<uint64_t>(size, 1));
  return static_cast<int>(std::min<uint64_t>(n, cap));
}

// Like perftest, every operation uses the same buffer unless payloads are checked: then each
// operation in flight needs a slot of its own (within kSlotBudget).
int slots_for(const P2pOptions& o, uint64_t size) {
  if (!o.check) return 1;
  return static_cast<int>(std::max<uint64_t>(2, std::min<uint64_t>(o.window, kSlotBudget / std::max<uint64_t>(size, 1))));
}

int warmup_for(const P2pOptions& o, int iters) { return o.warmup >= 0 ? o.warmup : std::max(1, iters / 10); }

// ---- bandwidth ------------------------------------------------------------------------
// The initiator keeps `window` operations in flight. With --check it works in batches of at
// most `slots` operations (so no slot is reused before it is verified): after each batch of
// writes the target verifies every slot of the batch and answers with the number of wrong
// payloads; reads are verified by the initiator, sends by the target as they arrive. Wrong
// payloads of the warm-up count like the timed ones: the warm-up is not timed, but a wrong
// byte there is still a wrong byte.

uint64_t pack_batch(int first, int count) { return static_cast<uint64_t>(first) << 32 | static_cast<uint32_t>(count); }

Status bw_phase(Ctx& c, uint64_t size, int first, int count, int slots, P2pRow& row) {
  const bool check = c.o.check;
  const bool target_checks = check && (c.op == Op::kWrite || c.op == Op::kWriteNotify);
  const int window = check ? std::min(c.o.window, slots) : c.o.window;
  const int end = first + count;
  auto post = [&](int i) -> Request {
    size_t off = static_cast<size_t>(i % slots) * size;
    if (check && c.op != Op::kRead) fill(c.data() + off, size, i);
    if (c.op == Op::kWrite) return c.ep->write(c.mr, off, c.peer_key, off, size);
    if (c.op == Op::kWriteNotify) return c.ep->write_notify(c.mr, off, c.peer_key, off, size, i);
    if (c.op == Op::kRead) return c.ep->read(c.mr, off, c.peer_key, off, size);
    return c.ep->send(c.data() + off, size, i);
  };
  std::deque<std::pair<int, Request>> inflight;
  int next = first, batch_start = first;
  while (next < end || !inflight.empty()) {
    bool batch_open = !check || next - batch_start < window;
    if (next < end && static_cast<int>(inflight.size()) < window && batch_open) {
      inflight.emplace_back(next, post(next));
      ++next;
      continue;
    }
    auto [i, r] = inflight.front();
    inflight.pop_front();
    PODNET_RETURN_IF_ERROR(r.wait(c.tmo));
    if (check && c.op == Op::kRead && !matches(c.data() + (i % slots) * size, size, i % slots)) row.wrong++;
    if (check && inflight.empty() && (next - batch_start == window || next == end)) {
      if (target_checks) {
        PODNET_RETURN_IF_ERROR(ctrl_send(c, kCtrlBatch, pack_batch(batch_start, next - batch_start)));
        PODNET_ASSIGN_OR_RETURN(uint64_t bad, ctrl_recv(c, kCtrlVerified));
        row.wrong += bad;
      }
      batch_start = next;
    }
  }
  return {};
}

Status bw_initiator(Ctx& c, uint64_t size, int iters, int warm, int slots, P2pRow& row) {
  PODNET_RETURN_IF_ERROR(ctrl_send(c, kCtrlGo, size));
  // The target answers once its buffer holds what a read should find: reads sent before that
  // would race with its fill.
  PODNET_RETURN_IF_ERROR(ctrl_recv(c, kCtrlGo).status());
  PODNET_RETURN_IF_ERROR(bw_phase(c, size, 0, warm, slots, row));  // its wrong payloads count too
  PODNET_RETURN_IF_ERROR(ctrl_send(c, kCtrlGo, size));  // the target is ready for the timed part
  PODNET_RETURN_IF_ERROR(ctrl_recv(c, kCtrlGo).status());
  int64_t t0 = now_ns();
  PODNET_RETURN_IF_ERROR(bw_phase(c, size, warm, iters, slots, row));
  // Remote completion: writes and reads are acknowledged already; sends and notifications
  // are complete when the target says it has them all.
  PODNET_ASSIGN_OR_RETURN(uint64_t bad, ctrl_recv(c, kCtrlDone));
  int64_t t1 = now_ns();
  row.wrong += bad;
  row.seconds = (t1 - t0) / 1e9;
  double bytes = static_cast<double>(size) * iters;
  row.gbytes_per_s = bytes / row.seconds / 1e9;
  row.gbits_per_s = row.gbytes_per_s * 8;
  row.mpps = iters / row.seconds / 1e6;
  return {};
}

// Receives/verifies what the initiator's operations [first, first+count) delivered.
Status bw_target_phase(Ctx& c, uint64_t size, int first, int count, int slots, uint64_t& wrong) {
  const int end = first + count;
  const int window = c.o.check ? std::min(c.o.window, slots) : c.o.window;
  if (c.op == Op::kSend) {
    std::deque<std::pair<int, Request>> posted;
    int next = first;
    const int depth = std::min(window, slots);
    for (int got = first; got < end;) {
      while (next < end && static_cast<int>(posted.size()) < depth) {
        posted.emplace_back(next, c.ep->recv(c.data() + (next % slots) * size, size, next));
        ++next;
      }
      auto [i, r] = posted.front();
      posted.pop_front();
      PODNET_RETURN_IF_ERROR(r.wait(c.tmo));
      if (c.o.check && (r.bytes() != size || !matches(c.data() + (i % slots) * size, size, i))) wrong++;
      ++got;
    }
    return {};
  }
  if (c.op != Op::kWrite && c.op != Op::kWriteNotify) return {};
  if (!c.o.check) {
    for (int i = first; i < end && c.op == Op::kWriteNotify; ++i) {
      Request n = c.ep->recv_notify();
      PODNET_RETURN_IF_ERROR(n.wait(c.tmo));
      if (n.imm() != static_cast<uint64_t>(i)) wrong++;
    }
    return {};
  }
  for (int done = first; done < end;) {
    PODNET_ASSIGN_OR_RETURN(uint64_t b, ctrl_recv(c, kCtrlBatch));
    int bfirst = static_cast<int>(b >> 32), bcount = static_cast<int>(b & 0xFFFFFFFF);
    uint64_t bad = 0;
    for (int i = bfirst; i < bfirst + bcount; ++i) {
      if (c.op == Op::kWriteNotify) {
        // The batch message follows every acknowledgement, so the notifications are here.
        Request n = c.ep->recv_notify();
        PODNET_RETURN_IF_ERROR(n.wait(c.tmo));
        if (n.imm() != static_cast<uint64_t>(i)) {
          bad++;
          continue;
        }
      }
      if (!matches(c.data() + (i % slots) * size, size, i)) bad++;
    }
    PODNET_RETURN_IF_ERROR(ctrl_send(c, kCtrlVerified, bad));
    done = bfirst + bcount;
  }
  return {};
}

Status bw_target(Ctx& c, uint64_t size, int iters, int warm, int slots) {
  PODNET_ASSIGN_OR_RETURN(uint64_t go, ctrl_recv(c, kCtrlGo));
  if (go != size) return Status::Internal("peer benchmarks {} bytes, this rank {}", go, size);
  if (c.op == Op::kRead)
    for (int s = 0; s < slots; ++s) fill(c.data() + s * size, size, s);
  PODNET_RETURN_IF_ERROR(ctrl_send(c, kCtrlGo, size));  // ready: the initiator may start
  uint64_t wrong = 0;  // the warm-up's and the timed part's
  PODNET_RETURN_IF_ERROR(bw_target_phase(c, size, 0, warm, slots, wrong));
  PODNET_RETURN_IF_ERROR(ctrl_recv(c, kCtrlGo).status());
  PODNET_RETURN_IF_ERROR(ctrl_send(c, kCtrlGo, size));
  PODNET_RETURN_IF_ERROR(bw_target_phase(c, size, warm, iters, slots, wrong));
  // Batch verdicts went back already; report only what the initiator has not counted.
  bool batch_checked = c.o.check && (c.op == Op::kWrite || c.op == Op::kWriteNotify);
  return ctrl_send(c, kCtrlDone, batch_checked ? 0 : wrong);
}

// ---- latency ---------------------------------------------------------------------------
// The write ping-pong's flag: the payload's last byte, different from the one before it.
std::byte marker(int iter) { return static_cast<std::byte>(1 + iter % 255); }

// The payload of iteration `iter` with its last byte replaced by the marker.
void fill_marked(std::byte* p, size_t n, int iter) {
  fill(p, n, static_cast<uint64_t>(iter));
  p[n - 1] = marker(iter);
}

// The operation timeout from now, as a CLOCK_MONOTONIC deadline.
int64_t deadline_of(const Ctx& c) {
  return now_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(c.tmo).count();
}

// Spins until *p == want, driving progress every few turns (a transport may need this rank's
// CPU to place an incoming write); fails on the operation timeout or when the peer fails.
Status spin_for_byte(Ctx& c, const std::byte* p, std::byte want, const char* what) {
  const auto* flag = reinterpret_cast<const unsigned char*>(p);
  const auto want_v = static_cast<unsigned char>(want);
  const int64_t deadline = deadline_of(c);
  for (unsigned n = 1;; ++n) {
    if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == want_v) return {};
    if (n % 16 != 0) continue;
    c.world.context().progress();
    if (n % 4096 != 0) continue;
    if (Status h = c.ep->health(); !h.ok()) return h.with_context("waiting for {}", what);
    if (now_ns() > deadline)
      return Status::Timeout("{} did not arrive from {} within {} ms", what, c.ep->peer_name(), c.tmo.count());
  }
}

// --check for the write ping-pong: the marker may be placed before the rest of the payload
// (a large write striped over several connections or queue pairs, which on a slow link can
// take seconds); the payload counts as wrong only if it is still not complete when the
// operation timeout has passed. A peer that fails meanwhile is an error naming it.
Result<bool> payload_complete(Ctx& c, const std::byte* p, size_t n, uint64_t iter) {
  if (c.scratch.size() < n) c.scratch.resize(n);
  fill_marked(c.scratch.data(), n, static_cast<int>(iter));
  const int64_t deadline = deadline_of(c);
  while (std::memcmp(p, c.scratch.data(), n) != 0) {
    if (Status h = c.ep->health(); !h.ok()) return h.with_context("waiting for the rest of write {}", iter);
    if (now_ns() > deadline) return false;
    c.world.context().progress();
  }
  return true;
}

Status lat_initiator(Ctx& c, uint64_t size, int iters, int warm, P2pRow& row) {
  PODNET_RETURN_IF_ERROR(ctrl_send(c, kCtrlGo, size));
  PODNET_RETURN_IF_ERROR(ctrl_recv(c, kCtrlGo).status());  // the target's buffer is ready
  telemetry::Histogram h;
  std::byte* src = c.data();
  std::byte* dst = c.data() + size;
  const bool pingpong = is_pingpong(c.o);
  int64_t total_ns = 0;
  Request last_write;  // the write ping-pong's previous write, reaped one round trip later
  for (int i = 0; i < warm + iters; ++i) {
    if (c.o.check && c.op == Op::kWrite) fill_marked(src, size, i);
    else if (c.o.check) fill(src, size, static_cast<uint64_t>(i));
    const uint64_t t0 = c.clock->ticks();
    if (c.op == Op::kWrite) {
      // Ping-pong through memory, as ib_write_lat: write into the target's second half, whose
      // last byte it watches; its echo lands in ours. As perftest, the write's own completion
      // (the target's acknowledgement) is not waited for in the round trip: the previous
      // one's is reaped once this echo is in (it is long back by then).
      src[size - 1] = marker(i);
      Request w = c.ep->write(c.mr, 0, c.peer_key, size, size);
      PODNET_RETURN_IF_ERROR(spin_for_byte(c, dst + size - 1, marker(i), "the echo of the write"));
      if (last_write.valid()) PODNET_RETURN_IF_ERROR(last_write.wait(c.tmo));
      last_write = std::move(w);
    } else if (c.op == Op::kRead) {
      PODNET_RETURN_IF_ERROR(c.ep->read(c.mr, size, c.peer_key, 0, size).wait(c.tmo));
    } else if (c.op == Op::kSend) {
      // The ping goes out first and the receive for the pong is posted while it travels, as
      // ucx_perftest does: posting it is off the round trip (a pong that came first would
      // wait as an unexpected message, which podnet handles like any other).
      Request s = c.ep->send(src, size, i);
      Request r = c.ep->recv(dst, size, i);
      PODNET_RETURN_IF_ERROR(s.wait(c.tmo));
      PODNET_RETURN_IF_ERROR(r.wait(c.tmo));
    } else {
      Request w = c.ep->write_notify(c.mr, 0, c.peer_key, size, size, i);
      Request n = c.ep->recv_notify();
      PODNET_RETURN_IF_ERROR(w.wait(c.tmo));
      PODNET_RETURN_IF_ERROR(n.wait(c.tmo));
    }
    const auto dt = static_cast<int64_t>(std::llround(c.clock->ns(c.clock->ticks() - t0)));
    if (i >= warm) {
      h.record(static_cast<uint64_t>(dt));
      total_ns += dt;
    }
    if (c.o.check) {
      // The target echoes what it received (ping-pong) or holds the pattern (read).
      uint64_t expect = c.op == Op::kRead ? 0 : static_cast<uint64_t>(i);
      bool ok = false;
      if (c.op == Op::kWrite) {
        PODNET_ASSIGN_OR_RETURN(ok, payload_complete(c, dst, size, expect));
      } else {
        ok = matches(dst, size, expect);
      }
      if (!ok) row.wrong++;
    }
  }
  if (last_write.valid()) PODNET_RETURN_IF_ERROR(last_write.wait(c.tmo));
  PODNET_ASSIGN_OR_RETURN(uint64_t bad, ctrl_recv(c, kCtrlDone));
  row.wrong += bad;
  double div = pingpong ? 2000.0 : 1000.0;  // ns -> us, halved for RTT/2
  auto s = h.summarize();
  row.t_min = s.min / div;
  row.t_typical = s.p50 / div;
  row.t_avg = static_cast<double>(total_ns) / iters / div;
  row.t_p99 = s.p99 / div;
  row.t_p999 = s.p999 / div;
  row.t_max = s.max / div;
  row.seconds = total_ns / 1e9;
  return {};
}

Status lat_target(Ctx& c, uint64_t size, int iters, int warm) {
  PODNET_ASSIGN_OR_RETURN(uint64_t go, ctrl_recv(c, kCtrlGo));
  if (go != size) return Status::Internal("peer benchmarks {} bytes, this rank {}", go, size);
  uint64_t wrong = 0;
  std::byte* in = c.data();
  if (c.op == Op::kRead) fill(in, size, 0);
  PODNET_RETURN_IF_ERROR(ctrl_send(c, kCtrlGo, size));
  Request echo;  // the write ping-pong's last echo: reaped once the next ping is in
  for (int i = 0; i < warm + iters; ++i) {
    if (c.op == Op::kWrite) {
      PODNET_RETURN_IF_ERROR(spin_for_byte(c, in + 2 * size - 1, marker(i), "the write"));
      if (echo.valid()) PODNET_RETURN_IF_ERROR(echo.wait(c.tmo));
      if (c.o.check) {
        PODNET_ASSIGN_OR_RETURN(bool complete, payload_complete(c, in + size, size, i));
        if (!complete) wrong++;
      }
      echo = c.ep->write(c.mr, size, c.peer_key, size, size);
    } else if (c.op == Op::kSend) {
      Request r = c.ep->recv(in, size, i);
      PODNET_RETURN_IF_ERROR(r.wait(c.tmo));
      if (c.o.check && !matches(in, size, i)) wrong++;
      // The reply leaves from the other half of the buffer, which the loop never writes, as
      // ucx_perftest's tag_lat replies from its send buffer (its lines may stay in the
      // initiator's cache). With --echo (and --check, which verifies it at the initiator)
      // the target replies with what it received.
      PODNET_RETURN_IF_ERROR(c.ep->send(echoes(c.o) ? in : in + size, size, i).wait(c.tmo));
    } else if (c.op == Op::kWriteNotify) {
      Request n = c.ep->recv_notify();
      PODNET_RETURN_IF_ERROR(n.wait(c.tmo));
      if (c.o.check && !matches(in + size, size, i)) wrong++;
      // Echo the payload back into the initiator's receive half.
      PODNET_RETURN_IF_ERROR(c.ep->write_notify(c.mr, size, c.peer_key, size, size, i).wait(c.tmo));
    }
  }
  if (echo.valid()) PODNET_RETURN_IF_ERROR(echo.wait(c.tmo));
  return ctrl_send(c, kCtrlDone, wrong);
}

}  // namespace

Result<std::vector<P2pRow>> run_p2p(World& world, const P2pOptions& o) {
  if (world.size() < 2) return Status::InvalidArgument("bench p2p needs 2 ranks (podnet run -n 2 podnet bench p2p)");
  if (world.rank() > 1) return std::vector<P2pRow>{};  // extra ranks sit this one out
  return run_p2p_pair(world, 1 - world.rank(), world.rank() == 0, o);
}

Result<std::vector<P2pRow>> run_p2p_pair(World& world, int peer, bool initiator, const P2pOptions& o) {
  std::vector<P2pRow> rows;
  if (o.mode == "lat" && o.op == "write" && std::find(o.sizes.begin(), o.sizes.end(), 0) != o.sizes.end())
    return Status::InvalidArgument("write latency needs at least 1 byte (the target watches the last one)");
  // Room for every size: its slots, and at least two messages (latency mode sends from the
  // first half and receives into the second).
  uint64_t buf_bytes = 0;
  for (uint64_t size : o.sizes)
    buf_bytes = std::max(buf_bytes, std::max<uint64_t>(size, 1) * std::max(2, slots_for(o, size)));
  Ctx c{world, o, op_of(o.op), nullptr, {}, {}, {}, world.timeout(), {}};
  if (o.mode == "lat") {
    PODNET_ASSIGN_OR_RETURN(c.clock, CycleClock::for_benchmarks());
  }
  PODNET_ASSIGN_OR_RETURN(c.ep, world.peer(peer));
  if (o.alloc) {
    PODNET_ASSIGN_OR_RETURN(c.mr, world.context().allocate_memory(buf_bytes + 64, Access::kRemoteReadWrite));
  } else {
    PODNET_RETURN_IF_ERROR(c.buf.allocate(buf_bytes + 64, o.hugepages));
    PODNET_ASSIGN_OR_RETURN(c.mr,
                            world.context().register_memory(c.buf.data(), c.buf.size(), Access::kRemoteReadWrite));
  }
  std::memset(c.data(), 0, c.mr.size());  // fault every page in before the timed loops
  PODNET_ASSIGN_OR_RETURN(c.peer_key, exchange_remote_key(*c.ep, c.mr.remote_key(), kCtrlKey, c.tmo));

  for (uint64_t size : o.sizes) {
    int iters = iterations_for(o, size);
    int warm = warmup_for(o, iters);
    int slots = slots_for(o, size);
    P2pRow row;
    row.bytes = size;
    row.iters = iters;
    Status st;
    if (o.mode == "bw") {
      st = initiator ? bw_initiator(c, size, iters, warm, slots, row) : bw_target(c, size, iters, warm, slots);
    } else {
      st = initiator ? lat_initiator(c, size, iters, warm, row) : lat_target(c, size, iters, warm);
    }
    if (!st.ok()) return st.with_context("bench p2p {} {} at {} bytes", o.op, o.mode, size);
    if (o.hugepages) row.hugepage_bytes = c.buf.huge_bytes();
    rows.push_back(row);
  }
  // The target's memory must stay registered until the initiator's last operation is done.
  if (initiator) PODNET_RETURN_IF_ERROR(ctrl_send(c, kCtrlFinish, 0));
  else PODNET_RETURN_IF_ERROR(ctrl_recv(c, kCtrlFinish).status());
  return rows;
}

}  // namespace podnet::tool

namespace podnet::tool {
std::string_view p2p_timer_name() {
  auto clock = CycleClock::for_benchmarks();
  return clock.ok() ? (*clock)->name() : "unknown";
}

void print_p2p(const P2pOptions& o, const World& world, const std::vector<P2pRow>& rows, std::string_view peer,
               std::string_view transport) {
  (void)world;
  const bool pingpong = is_pingpong(o);
  fmt::print("# podnet bench p2p: {} {}, transport {}, rank 0 -> {}\n", o.op, o.mode == "bw" ? "bandwidth" : "latency",
             transport, peer);
  if (o.alloc) fmt::print("# buffers from Context::allocate_memory (--alloc)\n");
  if (o.mode == "bw") {
    fmt::print("# bandwidth at remote completion; window {} operations; GB/s = 10^9 bytes/s{}\n", o.window,
               o.check ? "; --check: every payload verified (slower)" : "");
    fmt::print("{:>12} {:>12} {:>14} {:>14} {:>14} {:>8}\n", "#bytes", "#iterations", "BW avg[GB/s]", "BW avg[Gb/s]",
               "MsgRate[Mpps]", "#wrong");
    for (auto& r : rows)
      fmt::print("{:>12} {:>12} {:>14.3f} {:>14.3f} {:>14.4f} {:>8}\n", r.bytes, r.iters, r.gbytes_per_s, r.gbits_per_s,
                 r.mpps, r.wrong);
  } else {
    fmt::print("# latency in usec, {} ({}); timer {}{}\n", pingpong ? "RTT/2" : "RTT",
               pingpong ? "ping-pong, half the round trip" : "until the operation completes at the initiator",
               p2p_timer_name(), o.check ? "; --check: every payload verified" : "");
    fmt::print("{:>12} {:>12} {:>10} {:>12} {:>10} {:>10} {:>11} {:>10} {:>8}\n", "#bytes", "#iterations",
               "t_min[us]", "t_typical[us]", "t_avg[us]", "t_p99[us]", "t_p99.9[us]", "t_max[us]", "#wrong");
    for (auto& r : rows)
      fmt::print("{:>12} {:>12} {:>10.2f} {:>12.2f} {:>10.2f} {:>10.2f} {:>11.2f} {:>10.2f} {:>8}\n", r.bytes,
                 r.iters, r.t_min, r.t_typical, r.t_avg, r.t_p99, r.t_p999, r.t_max, r.wrong);
  }
  std::fflush(stdout);
}

nlohmann::json p2p_json(const P2pOptions& o, const std::vector<P2pRow>& rows, std::string_view transport) {
  nlohmann::json j;
  const bool pingpong = is_pingpong(o);
  j["benchmark"] = "p2p";
  j["op"] = o.op;
  j["mode"] = o.mode;
  j["transport"] = transport;
  j["check"] = o.check;
  j["hugepages"] = o.hugepages;
  j["alloc"] = o.alloc;
  if (o.mode == "lat") {
    if (o.op == "send") j["echo"] = echoes(o);
    j["latency_kind"] = pingpong ? "rtt/2" : "rtt";
    j["timer"] = p2p_timer_name();
  }
  j["results"] = nlohmann::json::array();
  for (auto& r : rows) {
    nlohmann::json x{{"bytes", r.bytes}, {"iterations", r.iters}, {"seconds", r.seconds}, {"wrong", r.wrong}};
    if (o.mode == "bw") {
      x["bw_gbytes_per_s"] = r.gbytes_per_s;
      x["bw_gbits_per_s"] = r.gbits_per_s;
      x["msg_rate_mpps"] = r.mpps;
    } else {
      x["t_min_us"] = r.t_min;
      x["t_typical_us"] = r.t_typical;
      x["t_avg_us"] = r.t_avg;
      x["t_p99_us"] = r.t_p99;
      x["t_p999_us"] = r.t_p999;
      x["t_max_us"] = r.t_max;
    }
    if (o.hugepages) x["hugepage_bytes"] = r.hugepage_bytes;
    j["results"].push_back(x);
  }
  return j;
}

}  // namespace podnet::tool
