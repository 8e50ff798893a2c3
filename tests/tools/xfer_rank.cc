// A rank program for the multi-process tests in p2p_test.cc, started through `podnet run -n 2`.
// It drives the transfer engine into the situations those tests provoke from outside (a peer
// killed or frozen mid-transfer, a receive that nothing satisfies) and prints one line that
// says what rank 0 saw, for the test to check.
//
//   podnet_xfer_rank stream BYTES      rank 0 writes BYTES to rank 1 in a loop until an error
//   podnet_xfer_rank stream-alloc BYTES  the same into memory rank 1 allocated
//                                      (Context::allocate_memory: over shm a mapped memcpy)
//                                      ("first write done" after the first); rank 1 prints
//                                      "ready" once set up, then sleeps forever
//   podnet_xfer_rank recv-wait [MS]    rank 0 posts a recv from rank 1 that nothing satisfies and
//                                      waits MS ms (default 60000); rank 1 prints "ready", then
//                                      waits for rank 0's all-clear message
//   podnet_xfer_rank notify-order COUNT BYTES
//                                      rank 0 posts COUNT write_notify of BYTES each (immediate
//                                      i for the i-th) before waiting for any; rank 1 checks
//                                      that the immediates arrive as 0, 1, ..., COUNT-1
//   podnet_xfer_rank allreduce-loop    both ranks run 8-byte allreduces in a loop (on one host:
//                                      through the shared-memory arena); rank 1 prints "ready"
//                                      after the first, rank 0 "first allreduce done"
//   podnet_xfer_rank ping-pong-sockets COUNT
//                                      COUNT 8-byte send/recv round trips (rank 0 sends first,
//                                      rank 1 answers), then each rank reads TCP_INFO of its own
//                                      TCP sockets (over tcp: which connections carried them)
//
// Every rank prints "pid N" first, so that the test can signal it and check it is gone.
//
// Verdict lines:
//   stream:    "rank 0 error after N ms: <status>"   N: time since the last completed write
//              (how long the failure took to surface); exit 0 when the status is peer-failed
//              and names rank 1, else 1
//   allreduce-loop: "rank 0 error after N ms: <status>" (as stream; N since the last call
//              that completed)
//   recv-wait: "rank 0 recv ended after N ms: <status>"  N: since the recv was posted; exit 0
//   ping-pong-sockets: each rank prints "rank R: K sockets sent COUNT data segments or more,
//              M of them received as many", then "rank R congestion: NAMES" (the congestion
//              control of those sockets, comma-separated) (exit 0, the test judges them)
//   notify-order: rank 1 prints "notifications in order" (exit 0), or "notification K has
//              immediate V, expected K; M of COUNT out of place" (exit 1)
//
// In stream and recv-wait, rank 0 ignores SIGTERM: `podnet run` stops the survivors as soon as
// one rank dies, and the tests want the survivor's own diagnosis, not the launcher's. The
// launcher's SIGKILL after --grace-ms and --timeout still bound it.
#include <dirent.h>
#include <netinet/in.h>
#include <linux/tcp.h>  // tcp_info with the data segment counts (glibc's lacks them)
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <podnet/coll.h>

#include "base/clock.h"
#include "xfer/world.h"

namespace podnet {
namespace {

constexpr uint64_t kTagKey = 1;
constexpr uint64_t kTagDone = 2;
constexpr auto kOpTimeout = std::chrono::seconds(60);  // far past PODNET_PEER_TIMEOUT_MS in the tests

// stdout is a pipe: every line must reach the test as soon as it is printed.
template <typename... A>
void say(fmt::format_string<A...> f, A&&... a) {
  std::string line = fmt::format(f, std::forward<A>(a)...) + "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

int fail(const Status& st, const char* what) {
  say("rank setup failed ({}): {}", what, st.to_string());
  return 1;
}

[[noreturn]] void sleep_forever() {
  for (;;) pause();
}

int64_t ms_since(int64_t t0) { return (now_ns() - t0) / 1'000'000; }

int stream(World& world, size_t bytes, bool alloc) {
  auto ep_or = world.peer(1 - world.rank());
  if (!ep_or.ok()) return fail(ep_or.status(), "peer");
  std::shared_ptr<Endpoint> ep = *ep_or;
  std::vector<std::byte> buf(std::max<size_t>(bytes, 1), std::byte{0x5A});
  auto mr = alloc ? world.context().allocate_memory(buf.size(), Access::kRemoteWrite)
                  : world.context().register_memory(buf.data(), buf.size(), Access::kRemoteWrite);
  if (!mr.ok()) return fail(mr.status(), alloc ? "allocate_memory" : "register_memory");
  auto peer_key = exchange_remote_key(*ep, mr->remote_key(), kTagKey, kOpTimeout);
  if (!peer_key.ok()) return fail(peer_key.status(), "remote key exchange");

  if (world.rank() == 1) {
    say("ready");
    sleep_forever();
  }
  int64_t last_ok = now_ns();
  uint64_t writes = 0;
  for (;;) {
    Status st = ep->write(*mr, 0, *peer_key, 0, bytes).wait(kOpTimeout);
    if (st.ok()) {
      last_ok = now_ns();
      if (++writes == 1) say("first write done");
      continue;
    }
    say("rank 0 error after {} ms: {}", ms_since(last_ok), st.to_string());
    say("rank 0 completed {} writes of {} bytes", writes, bytes);
    // Leaving through World's destructor is part of the test: with a failed endpoint it must
    // skip the exit barrier instead of waiting for the dead peer.
    bool expected = st.code() == Code::kPeerFailed && st.message().find("rank 1") != std::string::npos;
    return expected ? 0 : 1;
  }
}

int recv_wait(World& world, int64_t wait_ms) {
  auto ep_or = world.peer(1 - world.rank());
  if (!ep_or.ok()) return fail(ep_or.status(), "peer");
  std::shared_ptr<Endpoint> ep = *ep_or;
  uint64_t v = 0;
  if (world.rank() == 1) {
    say("ready");
    Status st = ep->recv(&v, sizeof v, kTagDone).wait(kOpTimeout);
    if (!st.ok()) return fail(st, "waiting for rank 0's all-clear");
    return 0;
  }
  // Both ranks are connected (World::create ended with a barrier), so the recv is posted on a
  // live endpoint: only the peer's death or silence may fail it before the wait runs out.
  int64_t t0 = now_ns();
  Request r = ep->recv(&v, sizeof v, 12345);
  Status st = r.wait(std::chrono::milliseconds(wait_ms));
  say("rank 0 recv ended after {} ms: {}", ms_since(t0), st.ok() ? std::string("ok") : st.to_string());
  if (st.code() == Code::kTimeout) {
    // The peer is healthy: tell it to leave, so that both exit 0 together.
    if (Status s = ep->send(&v, sizeof v, kTagDone).wait(kOpTimeout); !s.ok()) return fail(s, "all-clear");
  }
  return 0;
}

int allreduce_loop(World& world) {
  auto comm_or = Communicator::create(world);
  if (!comm_or.ok()) return fail(comm_or.status(), "Communicator::create");
  Communicator& comm = **comm_or;
  uint64_t in = world.rank() + 1, out = 0;
  for (uint64_t i = 0;; ++i) {
    int64_t t0 = now_ns();
    Status st = comm.allreduce(&in, &out, 1, DataType::kUint64, ReduceOp::kSum);
    if (!st.ok()) {
      say("rank {} error after {} ms: {}", world.rank(), ms_since(t0), st.to_string());
      return st.code() == Code::kPeerFailed && st.message().find("rank 1") != std::string::npos ? 0 : 1;
    }
    if (out != 3) {
      say("rank {} allreduce {} gave {}, expected 3", world.rank(), i, out);
      return 1;
    }
    if (i == 0 && world.rank() == 1) say("ready (algorithm {})", comm.last_algorithm(Collective::kAllreduce));
    if (i == 0 && world.rank() == 0) say("first allreduce done (algorithm {})", comm.last_algorithm(Collective::kAllreduce));
  }
}

// xfer.h: "messages (send/recv and notifications) are matched in the order the sender posted
// them", however many writes are in flight and whichever streams carry them.
int notify_order(World& world, int count, size_t bytes) {
  auto ep_or = world.peer(1 - world.rank());
  if (!ep_or.ok()) return fail(ep_or.status(), "peer");
  std::shared_ptr<Endpoint> ep = *ep_or;
  std::vector<std::byte> buf(std::max<size_t>(bytes, 1) * count, std::byte{0x5A});
  auto mr = world.context().register_memory(buf.data(), buf.size(), Access::kRemoteWrite);
  if (!mr.ok()) return fail(mr.status(), "register_memory");
  auto peer_key = exchange_remote_key(*ep, mr->remote_key(), kTagKey, kOpTimeout);
  if (!peer_key.ok()) return fail(peer_key.status(), "remote key exchange");

  if (world.rank() == 0) {
    std::vector<Request> reqs;
    for (int i = 0; i < count; ++i) {
      size_t off = static_cast<size_t>(i) * bytes;
      reqs.push_back(ep->write_notify(*mr, off, *peer_key, off, bytes, static_cast<uint64_t>(i)));
    }
    for (Request& r : reqs)
      if (Status st = r.wait(kOpTimeout); !st.ok()) return fail(st, "write_notify");
    say("posted {} write_notify of {} bytes", count, bytes);
    return 0;
  }
  std::vector<Request> notes;
  for (int i = 0; i < count; ++i) notes.push_back(ep->recv_notify());
  int misplaced = 0;
  std::string first;
  for (int i = 0; i < count; ++i) {
    if (Status st = notes[i].wait(kOpTimeout); !st.ok()) return fail(st, "recv_notify");
    if (notes[i].imm() == static_cast<uint64_t>(i)) continue;
    if (misplaced++ == 0) first = fmt::format("notification {} has immediate {}, expected {}", i, notes[i].imm(), i);
  }
  if (misplaced == 0) {
    say("notifications in order");
    return 0;
  }
  say("{}; {} of {} out of place", first, misplaced, count);
  return 1;
}

// How a ping-pong travels over tcp: whether the socket that sent one side's messages also
// received the other side's (one connection both ways) or not (one connection per direction).
int ping_pong_sockets(World& world, int count) {
  auto ep_or = world.peer(1 - world.rank());
  if (!ep_or.ok()) return fail(ep_or.status(), "peer");
  std::shared_ptr<Endpoint> ep = *ep_or;
  uint64_t v = 0;
  for (int i = 0; i < count; ++i) {
    if (world.rank() == 0) {
      v = static_cast<uint64_t>(i);
      if (Status st = ep->send(&v, sizeof v, 7).wait(kOpTimeout); !st.ok()) return fail(st, "send");
      if (Status st = ep->recv(&v, sizeof v, 7).wait(kOpTimeout); !st.ok()) return fail(st, "recv");
    } else {
      if (Status st = ep->recv(&v, sizeof v, 7).wait(kOpTimeout); !st.ok()) return fail(st, "recv");
      if (Status st = ep->send(&v, sizeof v, 7).wait(kOpTimeout); !st.ok()) return fail(st, "send");
    }
    if (v != static_cast<uint64_t>(i)) {
      say("rank {}: round trip {} carried {}", world.rank(), i, v);
      return 1;
    }
  }
  int senders = 0, both = 0;
  std::set<std::string> ccs;  // the congestion control of those sockets (TCP_CONGESTION), sorted
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return fail(Status::Internal("opendir /proc/self/fd"), "sockets");
  while (dirent* e = readdir(d)) {
    int fd = std::atoi(e->d_name);
    struct stat st {};
    if (fd <= 2 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    tcp_info ti{};
    socklen_t len = sizeof ti;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) continue;  // not TCP
    if (ti.tcpi_data_segs_out < static_cast<uint32_t>(count)) continue;
    ++senders;
    if (ti.tcpi_data_segs_in >= static_cast<uint32_t>(count)) ++both;
    char cc[32] = {};
    socklen_t cl = sizeof cc - 1;
    if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &cl) == 0) ccs.emplace(cc, strnlen(cc, cl));
  }
  closedir(d);
  say("rank {}: {} sockets sent {} data segments or more, {} of them received as many", world.rank(), senders, count,
      both);
  std::string joined;
  for (const std::string& c : ccs) joined += (joined.empty() ? "" : ",") + c;
  say("rank {} congestion: {}", world.rank(), joined);
  return 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: podnet_xfer_rank stream BYTES | stream-alloc BYTES | recv-wait [MS] | notify-order COUNT BYTES | allreduce-loop | "
               "ping-pong-sockets COUNT"
               "  (under podnet run -n 2)\n");
  return 2;
}

int run(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string mode = argv[1];
  if (mode != "stream" && mode != "stream-alloc" && mode != "recv-wait" && mode != "notify-order" && mode != "allreduce-loop" &&
      mode != "ping-pong-sockets")
    return usage();
  if ((mode.starts_with("stream") && argc != 3) || (mode == "notify-order" && argc != 4) ||
      (mode == "ping-pong-sockets" && argc != 3))
    return usage();
  auto world_or = World::create();
  if (!world_or.ok()) return fail(world_or.status(), "World::create");
  World& world = **world_or;
  if (world.size() != 2) {
    say("needs exactly 2 ranks, not {}", world.size());
    return 2;
  }
  if (mode == "ping-pong-sockets") return ping_pong_sockets(world, std::atoi(argv[2]));
  if (world.rank() == 0 && mode != "notify-order") signal(SIGTERM, SIG_IGN);
  say("pid {}", getpid());  // so that the test can signal the rank and check it is gone
  if (mode.starts_with("stream")) return stream(world, std::strtoull(argv[2], nullptr, 10), mode == "stream-alloc");
  if (mode == "allreduce-loop") return allreduce_loop(world);
  if (mode == "notify-order") return notify_order(world, std::atoi(argv[2]), std::strtoull(argv[3], nullptr, 10));
  return recv_wait(world, argc > 2 ? std::strtoll(argv[2], nullptr, 10) : 60000);
}

}  // namespace
}  // namespace podnet

int main(int argc, char** argv) { return podnet::run(argc, argv); }
