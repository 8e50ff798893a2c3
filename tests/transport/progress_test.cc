// The progress engine: its "host is crowded" filter (a snapshot of /proc/loadavg that
// catches one thread more than usual must not switch spinning waiters to yielding for a
// whole period), and the polls a blocked thread keeps up after it served a peer's operation.
#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include <podnet/xfer.h>

#include "base/clock.h"
#include "transport/progress.h"
#include "transport/request.h"

namespace podnet::detail {
namespace {

TEST(Hysteresis, FollowsOnlyReadingsThatAgreeSeveralTimesInARow) {
  Hysteresis h(true, 3);
  EXPECT_TRUE(h.update(false));
  EXPECT_TRUE(h.update(false));
  EXPECT_FALSE(h.update(false)) << "the third disagreeing reading in a row flips it";
  // One stray reading, then the usual one: no flip, and the count starts over.
  EXPECT_FALSE(h.update(true));
  EXPECT_FALSE(h.update(false));
  EXPECT_FALSE(h.update(true));
  EXPECT_FALSE(h.update(true));
  EXPECT_FALSE(h.update(false));
  EXPECT_FALSE(h.update(true));
  EXPECT_FALSE(h.update(true));
  EXPECT_TRUE(h.update(true));
  EXPECT_TRUE(h.value());
}

TEST(Hysteresis, OneReadingSufficesWhenAgreeIsOne) {
  Hysteresis h(false, 1);
  EXPECT_TRUE(h.update(true));
  EXPECT_FALSE(h.update(false));
}

// Input for nobody in particular: each event drains the eventfd and counts. As a peer's
// operation (what a one-sided write is to its target) it says so to the engine, as the
// transports do; else it stands for a reply to a request of this process (a write's
// acknowledgement) that the thread waiting here does not wait for.
class CountingFd : public EventHandler {
 public:
  explicit CountingFd(bool peer_operation) : fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)), peer_operation_(peer_operation) {}
  ~CountingFd() override { close(fd); }
  void on_event(uint32_t) override {
    uint64_t v;
    if (read(fd, &v, sizeof v) != sizeof v) return;
    if (peer_operation_) ProgressEngine::note_served();
    handled.fetch_add(1);
    if (t_app_thread) handled_by_app.fetch_add(1);
  }
  const int fd;
  std::atomic<int> handled{0};
  std::atomic<int> handled_by_app{0};  // by a thread that set t_app_thread
  static inline thread_local bool t_app_thread = false;

 private:
  const bool peer_operation_;
};

// Writes `inputs` events to fd, each once the previous one was handled and 1 ms later.
// Returns the engine's blocking polls from the first input handled to the last.
uint64_t feed_inputs(ProgressEngine& e, CountingFd& fd, int inputs) {
  uint64_t at_first = 0;
  for (int i = 0; i < inputs; ++i) {
    uint64_t one = 1;
    EXPECT_EQ(write(fd.fd, &one, sizeof one), static_cast<ssize_t>(sizeof one));
    const int64_t give_up = now_ns() + 10'000'000'000ll;
    while (fd.handled.load() <= i && now_ns() < give_up) std::this_thread::sleep_for(std::chrono::microseconds(50));
    EXPECT_EQ(fd.handled.load(), i + 1) << "input " << i << " was not handled within 10 s";
    if (i == 0) at_first = e.blocking_polls();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return e.blocking_polls() - at_first;
}

// Feeds `inputs` peers' operations to an engine whose only poller is a thread waiting
// (blocked: no spin) on a request the input never completes. Returns how many blocking polls
// it made after the first input was handled.
uint64_t blocks_while_serving(int serve_spin_us, int inputs) {
  ProgressEngine::Options o;
  o.spin_us = 0;
  o.serve_spin_us = serve_spin_us;
  o.serve_when_crowded = true;  // the verdict depends on this host's load, not the test's
  auto engine = ProgressEngine::create(o);
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  if (!engine.ok()) return 0;
  auto& e = **engine;
  CountingFd fd(/*peer_operation=*/true);
  EXPECT_TRUE(e.add(fd.fd, EPOLLIN, &fd).ok());
  auto req = make_request(&e, "test", 1);
  std::thread waiter([&] { EXPECT_TRUE(e.wait(*req, 30'000'000'000ll).ok()); });
  const uint64_t blocks = feed_inputs(e, fd, inputs);
  req->complete(Status::Ok());
  waiter.join();
  e.remove(fd.fd, &fd);
  return blocks;
}

TEST(ProgressEngine, ABlockedWaiterThatServedOtherInputPollsOnInsteadOfBlockingAgain) {
  // Without the serve spin the waiter blocks again after each input: a wake-up per input
  // (about 25 us each on the development VM, four times a one-sided write's round trip).
  EXPECT_GE(blocks_while_serving(0, 20), 19u);
  // With it (10 s here, so that no pause of a loaded host ends it) the waiter keeps polling
  // from the first input on, until its own request completes.
  EXPECT_EQ(blocks_while_serving(10'000'000, 20), 0u);
}

// Feeds `inputs` events to a started engine that nobody waits on (its background thread
// polls), once its start-up (when it rechecks the load every 2 ms) is over. Returns the
// blocking polls made from the first input handled to the last.
uint64_t background_blocks(bool peer_operations, int inputs) {
  ProgressEngine::Options o;
  o.serve_spin_us = 10'000'000;  // 10 s: only the housekeeping tick ends a serve spin
  o.serve_when_crowded = true;
  auto engine = ProgressEngine::create(o);
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  if (!engine.ok()) return 0;
  auto& e = **engine;
  CountingFd fd(peer_operations);
  EXPECT_TRUE(e.add(fd.fd, EPOLLIN, &fd).ok());
  e.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const uint64_t blocks = feed_inputs(e, fd, inputs);
  e.stop();
  e.remove(fd.fd, &fd);
  return blocks;
}

TEST(ProgressEngine, TheBackgroundThreadPollsOnAfterAPeersOperationButNotAfterAReply) {
  // A peer's operation (a one-sided write to serve): the background thread polls on for the
  // next one, blocking only at its housekeeping ticks (20 ms +-25 %: a handful in 20 inputs).
  EXPECT_LE(background_blocks(/*peer_operations=*/true, 20), 8u);
  // A reply to this process's own request (a write's acknowledgement): the application
  // thread that posted it polls for it when it waits, so the background thread blocks again
  // at once. Spinning 200 us after each acknowledgement of a 64 MiB write stream took a third
  // of a CPU from the two copying threads on 2 cores (write bandwidth 20-24 against 31-36 Gb/s).
  EXPECT_GE(background_blocks(/*peer_operations=*/false, 20), 19u);
}

// A started engine (its background thread polls while nobody waits) gets 20 replies 5 ms
// apart while an application thread calls `call(engine)` in a loop. Returns how many of them
// the background thread handled meanwhile and how often it blocked in epoll_wait (woke for
// an event: a parked thread does neither); checks that it handles one again once the
// application thread stops.
struct Background {
  int handled = 0;
  uint64_t blocking_polls = 0;
  int64_t longest_gap_ns = 0;  // between two of the application thread's calls, while fed
};
Background background_while(const std::function<void(ProgressEngine&)>& call) {
  ProgressEngine::Options o;
  auto engine = ProgressEngine::create(o);
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  if (!engine.ok()) return {-1, 0};
  auto& e = **engine;
  CountingFd fd(/*peer_operation=*/false);
  EXPECT_TRUE(e.add(fd.fd, EPOLLIN, &fd).ok());
  e.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // past the start-up rechecks
  const uint64_t blocking_before = e.blocking_polls();
  std::atomic<bool> active{true}, fed{false};
  std::atomic<int64_t> longest_gap{0};
  std::thread app([&] {
    CountingFd::t_app_thread = true;
    int64_t last = now_ns();
    while (active.load()) {
      call(e);
      std::this_thread::yield();  // a posting thread between its calls; a sleep here could
                                  // outlast the grace on an emulated CPU
      const int64_t now = now_ns();
      if (fed.load(std::memory_order_relaxed) && now - last > longest_gap.load(std::memory_order_relaxed))
        longest_gap.store(now - last, std::memory_order_relaxed);
      last = now;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  fed = true;
  uint64_t one = 1;
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(write(fd.fd, &one, sizeof one), static_cast<ssize_t>(sizeof one));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int while_active = fd.handled.load();
  const Background in_background{while_active - fd.handled_by_app.load(), e.blocking_polls() - blocking_before,
                                 longest_gap.load()};
  active = false;
  app.join();
  // Once the application stops, the background thread takes over within the grace (2 ms)
  // and a park; 5 s allows for a loaded host.
  EXPECT_EQ(write(fd.fd, &one, sizeof one), static_cast<ssize_t>(sizeof one));
  const int64_t give_up = now_ns() + 5'000'000'000ll;
  while (fd.handled.load() == while_active && now_ns() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GT(fd.handled.load(), while_active) << "the background thread did not resume after the application stopped";
  e.stop();
  e.remove(fd.fd, &fd);
  return in_background;
}

// The least of up to three runs of `measure` (stops at the first at or below `bound`): on a
// host busy with other tests the application thread can be descheduled past the grace
// (2 ms), and the background thread then rightly takes over; that only ever adds. Without
// the rule under test every run is far above the bound.
template <typename F>
uint64_t least_of_three(uint64_t bound, F measure) {
  uint64_t best = measure();
  for (int i = 1; i < 3 && best > bound; ++i) best = std::min<uint64_t>(best, measure());
  return best;
}

// ... while the application thread keeps finding a completed request of kind `op` in
// Request::wait.
int handled_while_finding_done(const char* op, size_t bytes = 8) {
  return background_while([op, bytes](ProgressEngine& e) {
           auto state = make_request(&e, op, 1);
           state->bytes = bytes;
           state->complete(Status::Ok());
           EXPECT_TRUE(Request(state).wait(std::chrono::seconds(1)).ok());
         })
      .handled;
}

TEST(ProgressEngine, TheBackgroundThreadStaysParkedWhileTheApplicationFindsItsOneSidedOrBulkRequestsDone) {
  // A thread that keeps posting writes and finds them complete whenever it waits (the
  // acknowledgements came in meanwhile) drives the engine itself at its next wait: the
  // background thread must not wake for every acknowledgement and take the CPU from it (tcp
  // write bandwidth at 1 MiB, window 64: it woke 2 600 times in 0.5 s, preempting the posting
  // thread each time; 24-28 against 33-41 Gb/s once it stayed parked). Without the rule all
  // 20 replies are handled at once; with it, only those that land in a gap of more than the
  // grace between two of the thread's calls, when a loaded host deschedules it: 0 here and in
  // the soft-RoCE VM (four runs each); a first form that slept between the calls saw 6 and 11
  // there, whose emulated CPUs run everything several times slower. The bound is half.
  EXPECT_LE(least_of_three(10, [] { return handled_while_finding_done("write"); }), 10u);
  EXPECT_LE(least_of_three(10, [] { return handled_while_finding_done("read"); }), 10u);
  // Two-sided requests keep the old behaviour: a receive found complete says nothing about
  // who drives the engine (collectives were left as they were measured) ...
  EXPECT_GE(handled_while_finding_done("send"), 15);
  EXPECT_GE(handled_while_finding_done("recv", 256 * 1024 - 1), 15);
  // ... unless it is a bulk transfer (from 256 KiB): the application streams. Over shm with
  // 64 receives of 4 MiB posted, the background thread woke to serve the sender's records and
  // spun on, a third thread on two cores: 16.2-16.8 against 25.1-25.7 GB/s.
  EXPECT_LE(least_of_three(10, [] { return handled_while_finding_done("recv", 256 * 1024); }), 10u);
  EXPECT_LE(least_of_three(10, [] { return handled_while_finding_done("send", 4u << 20); }), 10u);
}

// A thread that polls instead of waiting (Request::test on a pending request,
// Context::progress, which is ProgressEngine::drive) handles the replies itself: the
// background thread stays parked meanwhile instead of waking for each one and competing
// with it for the CPU (the bench's write ping-pong watches memory and calls
// Context::progress; with the background thread awake the soft-RoCE VM read 40-51 us
// against 29-31 us). Awake, it blocks in epoll_wait at least once per reply (20); parked,
// it does not at all (0 here); the bound is half.
//
// The rule holds while the thread keeps calling: a host busy with other tests can deschedule
// it past the grace (2 ms), and the background thread then rightly takes over (ctest -j2 of
// the whole suite: 21 blocking polls, least of three runs, in 2 of 8 tries, with or without
// the change that made drive() a spin turn). So only runs in which the thread never paused
// for 1.5 ms count: the least of up to five such runs; none at all skips, saying why.
void expect_parked_while_polling(const char* what, const std::function<void(ProgressEngine&)>& call) {
  int valid = 0;
  uint64_t best = UINT64_MAX;
  int64_t shortest_gap = INT64_MAX;
  for (int run = 0; run < 5 && best > 10; ++run) {
    const Background b = background_while(call);
    shortest_gap = std::min(shortest_gap, b.longest_gap_ns);
    if (b.longest_gap_ns >= 1'500'000) continue;
    ++valid;
    best = std::min(best, b.blocking_polls);
  }
  if (valid == 0) {
    GTEST_SKIP() << what << ": in 5 runs the polling thread always paused for >= 1.5 ms (shortest longest pause "
                 << shortest_gap / 1000 << " us): the host is too busy to tell";
  }
  EXPECT_LE(best, 10u) << what << ": least blocking polls of the background thread over " << valid
                       << " runs in which the application thread kept polling";
}

TEST(ProgressEngine, TheBackgroundThreadStaysParkedWhileTheApplicationPolls) {
  expect_parked_while_polling("Context::progress", [](ProgressEngine& e) { e.drive(); });
  expect_parked_while_polling("Request::test", [](ProgressEngine& e) {
    Request pending(make_request(&e, "recv", 1));
    EXPECT_FALSE(pending.test());
  });
}

// A doorbell that stays readable (its handler never drains it) and is no spin target: every
// epoll_wait() of the engine reports it, and nothing else calls its handler.
class Doorbell : public EventHandler {
 public:
  Doorbell() : fd(eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Doorbell() override { close(fd); }
  void on_event(uint32_t) override { ++seen; }
  bool spin_target() const noexcept override { return false; }
  const int fd;
  int seen = 0;
};

class CountingPoller : public Poller {
 public:
  int poll() override {
    ++polls;
    return 0;
  }
  bool arm() override { return true; }
  void disarm() override {}
  int polls = 0;
};

// A thread that calls Context::progress() (drive) in a loop, as the bench's write ping-pong
// does while it watches memory, polls the pollers (verbs completion queues, shm rings) on
// every call but, while no socket had input, makes the epoll_wait() system call at most
// every 100 us of its loop, even with a descriptor that stays readable (a completion
// channel nobody drains): the verbs write ping-pong made 13-28 epoll_wait calls per
// iteration once, ~1.4 us each in the soft-RoCE VM, and 0.4-3.4 with a call every 8th to
// 64th turn. Descriptors are still seen. Once sockets are in play, every call polls them all
// (tcp: the input may come on any connection).
TEST(ProgressEngine, PollingCallersReachThePollersEveryTimeAndEpollEveryFewCalls) {
  auto engine = ProgressEngine::create(ProgressEngine::Options{});
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  auto& e = **engine;
  CountingPoller poller;
  ASSERT_TRUE(e.add_poller(&poller).ok());
  Doorbell bell;  // always readable
  ASSERT_TRUE(e.add(bell.fd, EPOLLIN, &bell).ok());
  const int64_t start = now_ns();
  int calls = 0;
  for (; now_ns() - start < 20'000'000 || calls < 800; ++calls) e.drive();
  const int64_t elapsed_us = (now_ns() - start) / 1000;
  EXPECT_GE(poller.polls, calls) << "the pollers run on every call";
  EXPECT_GE(bell.seen, 5) << "descriptors are still polled (" << calls << " calls in " << elapsed_us << " us)";
  EXPECT_LE(bell.seen, elapsed_us / 100 + 1) << "epoll_wait at most every 100 us (" << calls << " calls)";
  EXPECT_LE(bell.seen, calls / 8 + 1) << "and on at most every 8th call";
  // Once a connection had input (a spin target: a tcp connection), every call polls them all.
  CountingFd conn(/*peer_operation=*/false);
  ASSERT_TRUE(e.add(conn.fd, EPOLLIN, &conn).ok());
  uint64_t one = 1;
  ASSERT_EQ(write(conn.fd, &one, sizeof one), static_cast<ssize_t>(sizeof one));
  const int64_t give_up = now_ns() + 1'000'000'000;  // the first input is found by epoll: within 100 us
  while (conn.handled.load() == 0 && now_ns() < give_up) e.drive();
  ASSERT_EQ(conn.handled.load(), 1);
  const int before = bell.seen;
  for (int i = 0; i < 100; ++i) e.drive();
  EXPECT_EQ(bell.seen - before, 100) << "with sockets in play, epoll_wait on every call";
  e.remove(conn.fd, &conn);
  e.remove(bell.fd, &bell);
}

// An engine whose background thread never started counts the host as crowded (its first
// verdict), whatever this host's load: the short spin applies.
TEST(ProgressEngine, OnACrowdedHostWaitsThatKeepOutlastingTheSpinStopSpinningUntilOneIsShort) {
  ProgressEngine::Options o;
  o.spin_us = 100'000;  // 100 ms: a wait that completes after 20 ms never gets to block
  o.spin_long_us = 0;   // the short mode blocks at once
  auto engine = ProgressEngine::create(o);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  auto& e = **engine;
  // The blocking polls made by a wait whose request another thread completes after 20 ms
  // (long enough for the waiter to get there first even on the soft-RoCE VM's emulated CPUs,
  // where 1 ms was not: the request was complete before the wait began, once in a CI run).
  auto blocks_waiting_20ms = [&e] {
    auto req = make_request(&e, "test", 1);
    const uint64_t before = e.blocking_polls();
    std::thread completer([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      req->complete(Status::Ok());
    });
    EXPECT_TRUE(e.wait(*req, 30'000'000'000ll).ok());
    completer.join();
    return e.blocking_polls() - before;
  };
  auto outlast_the_spin = [&e] {  // a wait that times out after 110 ms, beyond the spin
    auto req = make_request(&e, "test", 1);
    EXPECT_EQ(e.wait(*req, 110'000'000).code(), Code::kTimeout);
  };
  EXPECT_EQ(blocks_waiting_20ms(), 0u) << "a wait that completes within the spin does not block";
  for (int i = 0; i < 3; ++i) outlast_the_spin();
  EXPECT_EQ(blocks_waiting_20ms(), 0u) << "three long waits in a row are not yet enough; and this one resets";
  for (int i = 0; i < 4; ++i) outlast_the_spin();
  EXPECT_GT(blocks_waiting_20ms(), 0u) << "after four long waits in a row the next wait blocks at once";
  EXPECT_EQ(blocks_waiting_20ms(), 0u) << "the short wait before brought the full spin back";
}

}  // namespace
}  // namespace podnet::detail
