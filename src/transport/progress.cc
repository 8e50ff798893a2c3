#include "transport/progress.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "base/futex.h"
#include "transport/request.h"

namespace podnet::detail {
namespace {
// The background thread stays out of epoll this long after the last waiter left, so a
// ping-pong loop that waits again right away does not have to kick it out every time.
constexpr int64_t kParkGraceNs = 2'000'000;
// note_active() refreshes the grace at most this often.
constexpr int64_t kActiveNoteNs = 100'000;
// A blocked waiter re-checks its request at least this often.
constexpr int kBlockSliceMs = 5;
// A spinning waiter on a host with a CPU per runnable thread yields this rarely: a yield is
// a system call per few polls, a third of a hardware RDMA round trip.
constexpr unsigned kQuietYieldMask = 255;
// In the first kStartupNs after start the load is read again this soon (else every tick):
// a job's start (ranks and the launcher starting, sleeping in connects) reads wrong either
// way until the first tick 20 ms later, and twice as long when the background thread parks.
// Measured: a 20000-round-trip shm benchmark (16 ms) ran through with yields (0.48 instead
// of 0.37 us in about one run of three), and the first 200 calls of an 8 B tcp allreduce on
// 4 ranks on 2 cores (about 45 ms) ran without them at 150-180 instead of 50-60 us per call.
// Not later: on a host that stays crowded, a wake-up every 2 ms per rank would take cores
// from the ranks.
constexpr int64_t kCrowdedRecheckNs = 2'000'000, kStartupNs = 500'000'000;
// The running count is a snapshot, and a snapshot that catches one more thread than usual
// (another rank's background thread reading the load at the same moment, a kernel worker)
// read "crowded" for a whole period: 2-rank shm ping-pongs then ran at 1.0 instead of 0.77 us
// per round trip for 10-30 ms stretches, in most runs. So the flag follows the readings only
// after kCrowdedAgree of them in a row disagree with it, and each period is drawn within
// +-25 % (without that, 3 runs in 8 still had the slow stretches: ranks started together
// keep reading at the same instants and see each other's reader).
constexpr int kCrowdedAgree = 3;
constexpr unsigned kEpollMaskMin = 7, kEpollMaskMax = 63;
// A spinning thread's epoll_wait() while no socket had input: at most this often. 0.3-1 us
// per call (1 us under TCG) in every 100 us of spinning is below 1 %; every 8th to 64th turn
// of a verbs or shm spin (a poll of a completion queue or ring, 50-100 ns on hardware) it
// was 10-20 %, and 0.4-3.4 calls per round trip of the soft-RoCE write ping-pong.
constexpr int64_t kIdleEpollNs = 100'000;
// Waits in a row longer than the spin before the engine shortens it on a crowded host. With
// 8 ranks on 2 CPUs behind 1 Gbit/s links every wait for a 256 KiB chunk takes milliseconds:
// a full spin of yields per wait made 83 % of the ranks' 120 000 context switches a second
// and took the CPUs from the kernel's packet processing (docs/performance.md).
constexpr int kLongWaitsToShorten = 4, kLongWaitsCap = 1 << 20;

// Runnable threads on this host right now (the 4th field of /proc/loadavg: "running/total"),
// or -1 when unknown.
int runnable_threads() {
  int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[128];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  int running = -1;
  if (std::sscanf(buf, "%*f %*f %*f %d/", &running) != 1) return -1;
  return running;
}
}  // namespace

ProgressEngine::ProgressEngine(const Options& options) : options_(options), crowded_filter_(true, kCrowdedAgree) {}

Result<std::unique_ptr<ProgressEngine>> ProgressEngine::create(const Options& options) {
  std::unique_ptr<ProgressEngine> e(new ProgressEngine(options));
  e->yield_mask_ = options.yield_every <= 1 ? 0 : (1u << (31 - __builtin_clz(static_cast<unsigned>(options.yield_every)))) - 1;
  // crowded_ stays true (yield as before) until the background thread reads the load as it
  // starts; reading it here would count this thread, a future spinner, as the reader.
  e->ncpus_ = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  e->epfd_ = epoll_create1(EPOLL_CLOEXEC);
  if (e->epfd_ < 0) return Status::Unavailable("epoll_create1: {}", std::strerror(errno));
  e->wakefd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (e->wakefd_ < 0) return Status::Unavailable("eventfd: {}", std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // nullptr marks the wake-up fd
  if (epoll_ctl(e->epfd_, EPOLL_CTL_ADD, e->wakefd_, &ev) != 0)
    return Status::Unavailable("epoll_ctl(eventfd): {}", std::strerror(errno));
  return e;
}

ProgressEngine::~ProgressEngine() {
  stop();
  if (wakefd_ >= 0) close(wakefd_);
  if (epfd_ >= 0) close(epfd_);
}

Status ProgressEngine::add(int fd, uint32_t events, EventHandler* handler) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = handler;
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0)
    return Status::Internal("epoll_ctl(add fd {}): {}", fd, std::strerror(errno));
  return {};
}

void ProgressEngine::modify(int fd, uint32_t events, EventHandler* handler) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = handler;
  if (epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev) != 0)
    PODNET_ERROR(kNet, "epoll_ctl(mod fd {}): {}", fd, std::strerror(errno));
}

void ProgressEngine::remove(int fd, EventHandler* handler) {
  epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
  EventHandler* expected = handler;
  hot_.compare_exchange_strong(expected, nullptr);
}

void ProgressEngine::add_housekeeping(std::function<void()> fn) { housekeeping_.push_back(std::move(fn)); }

Status ProgressEngine::add_poller(Poller* poller) {
  int n = npollers_.load(std::memory_order_relaxed);
  if (n == kMaxPollers) return Status::Internal("progress engine: more than {} pollers", kMaxPollers);
  pollers_[n] = poller;
  npollers_.store(n + 1, std::memory_order_release);
  return {};
}

int ProgressEngine::run_pollers() {
  int n = npollers_.load(std::memory_order_acquire), work = 0;
  for (int i = 0; i < n; ++i) work += pollers_[i]->poll();
  return work;
}

void ProgressEngine::start() {
  if (running_.exchange(true)) return;
  thread_ = std::thread([this] { background_loop(); });
}

void ProgressEngine::stop() {
  if (!running_.exchange(false)) return;
  park_word_.fetch_add(1);
  futex_wake_all(&park_word_);
  wake();
  if (thread_.joinable()) thread_.join();
}

void ProgressEngine::wake() {
  uint64_t one = 1;
  ssize_t n = write(wakefd_, &one, sizeof one);
  (void)n;  // EAGAIN means a wake-up is already pending
}

void ProgressEngine::note_deferred() {
  deferred_.store(true, std::memory_order_release);
  defer_count_.fetch_add(1);
  // The first deferral of a burst gets the background thread out of a long park, so that it
  // parks briefly from now on (the later ones cost nothing here).
  if (!defer_active_.load() && !defer_active_.exchange(true)) {
    park_word_.fetch_add(1);
    futex_wake_all(&park_word_);
  }
}

namespace {
// Peers' operations handled by this thread (note_served); poll() reads the difference.
thread_local uint64_t t_served = 0;
}  // namespace

void ProgressEngine::note_served() noexcept { ++t_served; }

void ProgressEngine::note_active() noexcept {
  // Written at most every kActiveNoteNs: the background thread reads this line.
  const int64_t now = now_ns();
  if (now - fg_last_exit_ns_.load(std::memory_order_relaxed) > kActiveNoteNs)
    fg_last_exit_ns_.store(now, std::memory_order_release);
}

int ProgressEngine::poll(int timeout_ms, int* fd_events, int* served) {
  flush_deferred();  // held output from earlier turns leaves before anything else is read
  const uint64_t served_before = t_served;
  int work = run_pollers();
  if (work > 0) timeout_ms = 0;
  const int np = npollers_.load(std::memory_order_acquire);
  int armed = 0;
  if (timeout_ms != 0) {
    for (; armed < np; ++armed) {
      if (!pollers_[armed]->arm()) {
        timeout_ms = 0;  // work arrived while arming: do not block
        ++armed;
        break;
      }
    }
  }
  if (timeout_ms != 0) blocking_polls_.fetch_add(1, std::memory_order_relaxed);
  epoll_event events[64];
  int n = epoll_wait(epfd_, events, 64, timeout_ms);
  if (fd_events != nullptr) *fd_events = std::max(n, 0);
  for (int i = 0; i < armed; ++i) pollers_[i]->disarm();
  if (n < 0) {
    if (errno != EINTR) PODNET_ERROR(kNet, "epoll_wait: {}", std::strerror(errno));
    work += run_pollers();
    if (served != nullptr) *served = work;
    return work;
  }
  for (int i = 0; i < n; ++i) {
    auto* h = static_cast<EventHandler*>(events[i].data.ptr);
    if (h == nullptr) {
      uint64_t v;
      ssize_t r = read(wakefd_, &v, sizeof v);
      (void)r;
      continue;
    }
    if ((events[i].events & EPOLLIN) && h->spin_target()) hot_.store(h, std::memory_order_release);
    h->on_event(events[i].events);
  }
  if (np > 0 && (armed > 0 || n > 0)) work += run_pollers();
  if (served != nullptr) *served = work + static_cast<int>(t_served - served_before);
  return work + n;
}

// Mostly try the connection the last input came on (one recv() when the reply is there,
// instead of epoll_wait() + recv()); every (epoll_mask_+1)th turn polls everything. Measured:
// median 8 B send RTT/2 4.9 us vs 5.3 us with epoll_wait() alone (docs/performance.md).
// Pollers (shared-memory rings, verbs completion queues) cost a few loads: every turn.
// epoll_wait is a system call: every 8th turn at most, except on a crowded host once sockets
// are in play: then every turn, since the peer that answers next is rarely the one that
// answered last (4 ranks on 2 CPUs over tcp, 32 B allgather 26-31 us against 40-43 with the
// hot connection tried first; see docs/performance.md).
// While no socket ever had input, a turn calls epoll_wait() at most every kIdleEpollNs (any
// thread): a descriptor then carries nothing a spinning thread waits for (new connections, a
// peer's set-up socket closing, wake-ups meant for a sleeper); a readable one that is not
// drained at once, such as a completion channel, kept the call at every 8th turn.
void ProgressEngine::spin_turn(unsigned turn, bool crowded) {
  EventHandler* hot = hot_.load(std::memory_order_acquire);
  const unsigned epoll_mask = crowded && hot != nullptr ? 0u : epoll_mask_.load(std::memory_order_relaxed);
  bool epoll_turn = (turn & epoll_mask) == epoll_mask;
  if (epoll_turn && hot == nullptr) {
    const int64_t now = now_ns();
    if (now < next_idle_epoll_ns_.load(std::memory_order_relaxed)) {
      epoll_turn = false;
    } else {
      next_idle_epoll_ns_.store(now + kIdleEpollNs, std::memory_order_relaxed);
    }
  }
  if (!epoll_turn) {
    if (hot != nullptr) hot->on_event(EPOLLIN);
    run_pollers();
    return;
  }
  int events = 0;
  poll(0, &events);
  // Back off only while no socket ever had input (shm and verbs progress through the
  // pollers): with tcp peers, data on another connection than the hot one needs epoll, and
  // backing off there measured 20-30 % slower on 4-rank 8 B allreduce.
  const bool back_off = events == 0 && hot == nullptr;
  const unsigned next = back_off ? std::min(epoll_mask * 2 + 1, kEpollMaskMax) : kEpollMaskMin;
  // Written only when it changes: the crowded path comes here on every turn, and the
  // engine's other waiters read this line.
  if (next != epoll_mask_.load(std::memory_order_relaxed)) epoll_mask_.store(next, std::memory_order_relaxed);
}

namespace {
thread_local unsigned t_drive_turns = 0;  // drive()'s turns on this thread
}  // namespace

void ProgressEngine::drive() {
  note_active();
  // Once sockets are in play (a connection had input), every call polls them all: what a
  // polling caller watches for may come on any connection (the tcp write ping-pong: the
  // peer's write on one, the acknowledgement of ours on another; trying the last one first
  // read 8.5 against 7.2 us).
  if (hot_.load(std::memory_order_acquire) != nullptr) {
    poll(0);
    return;
  }
  flush_deferred();
  spin_turn(t_drive_turns++, crowded_.load(std::memory_order_relaxed));
}

Status ProgressEngine::wait(RequestState& req, int64_t timeout_ns) {
  flush_deferred();
  if (req.done()) return req.status();
  fg_waiters_.fetch_add(1, std::memory_order_acq_rel);
  if (bg_polling_.load(std::memory_order_acquire)) wake();  // get the background thread out of epoll
  const int64_t start = now_ns();
  int64_t now = start;
  const int64_t deadline_ns = timeout_ns < 0 || timeout_ns > INT64_MAX - start ? INT64_MAX : start + timeout_ns;
  const bool crowded = crowded_.load(std::memory_order_relaxed);
  const int long_waits = long_waits_.load(std::memory_order_relaxed);
  const int spin_us = crowded && long_waits >= kLongWaitsToShorten ? std::min(options_.spin_us, options_.spin_long_us)
                                                                     : options_.spin_us;
  const int64_t spin_end = options_.busy_poll ? deadline_ns : now + spin_us * 1000ll;
  const unsigned yield_mask = crowded ? yield_mask_ : kQuietYieldMask;
  for (unsigned spins = 0; !req.done() && now < spin_end && now < deadline_ns; ++spins) {
    spin_turn(spins, crowded);
    // The clock every 16th turn: a read costs 23 ns here, more than a turn that finds
    // nothing over shm, so reading it every 4th made the loop slower to see an arrival (8 B
    // shm send ping-pong, eight interleaved rounds: median RTT/2 155.5 against 160.5 ns).
    if ((spins & 15) == 15) now = now_ns();
    // On an oversubscribed host the peer we wait for may need this core: let it run now
    // and then (each yield is a system call, so not on every turn).
    if ((spins & yield_mask) == yield_mask) sched_yield();
  }
  while (!req.done() && now < deadline_ns) {
    int64_t left_ms = (deadline_ns - now + 999'999) / 1'000'000;
    int slice = static_cast<int>(std::min<int64_t>(left_ms, kBlockSliceMs));
    if (block_mu_.try_lock()) {
      int work = req.done() ? 0 : poll(slice);
      block_mu_.unlock();
      if (work > 0 && !req.done()) serve_spin(&req, deadline_ns);
    } else {
      // Another thread is blocked in epoll and will complete our request if it can.
      req.block_for(std::min<int64_t>(deadline_ns - now, 1'000'000));
      poll(0);
    }
    now = now_ns();
  }
  // A wait is long when it outlasted the full spin, whatever it spun: in the short mode a
  // wait that still completes within PODNET_SPIN_US brings the full spin back. Written only
  // when it changes: every waiter of the engine reads this line.
  if (now - start < options_.spin_us * 1000ll) {
    if (long_waits != 0) long_waits_.store(0, std::memory_order_relaxed);
  } else if (long_waits < kLongWaitsCap) {
    long_waits_.fetch_add(1, std::memory_order_relaxed);
  }
  fg_last_exit_ns_.store(now, std::memory_order_release);  // a few turns old at most: no clock read on the way out
  fg_waiters_.fetch_sub(1, std::memory_order_acq_rel);
  if (!req.done()) {
    return Status::Timeout("{} seq {} not complete after waiting {} ms", req.op(), req.seq(),
                           (now - start) / 1'000'000);
  }
  return req.status();
}

void ProgressEngine::refresh_crowded() {
  // The count includes the thread reading it (this one, which then goes back to sleep).
  int others = runnable_threads() - 1;
  const bool was = crowded_filter_.value();
  const bool now_crowded = crowded_filter_.update(others < 0 || others > ncpus_);
  crowded_.store(now_crowded, std::memory_order_relaxed);
  if (now_crowded != was)
    PODNET_DEBUG(kNet, "progress: {} other runnable threads, {} CPUs: spinning waiters now yield every {} polls",
                 others, ncpus_, now_crowded ? yield_mask_ + 1 : kQuietYieldMask + 1);
}

void ProgressEngine::background_loop() {
  const int64_t started = now_ns();
  int64_t next_tick = started, next_load = started;
  uint64_t defers_seen = 0;
  uint64_t rng = static_cast<uint64_t>(started) ^ static_cast<uint64_t>(getpid()) << 20;
  auto jittered = [&rng](int64_t period_ns) {  // period_ns +-25 % (xorshift64)
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return period_ns * 3 / 4 + static_cast<int64_t>(rng % static_cast<uint64_t>(period_ns / 2 + 1));
  };
  while (running_.load(std::memory_order_acquire)) {
    int64_t now = now_ns();
    if (now >= next_load) {
      refresh_crowded();
      const bool soon = now - started < kStartupNs;
      next_load = now + jittered(soon ? kCrowdedRecheckNs : options_.tick_ms * 1'000'000ll);
    }
    if (now >= next_tick) {
      for (auto& fn : housekeeping_) fn();
      // No deferral for a whole tick: park long again. One that slips in between the two
      // reads of the count sets the flag back (note_deferred counts first, then sets it:
      // whichever way they interleave, the flag ends up set).
      const uint64_t defers = defer_count_.load();
      if (defers == defers_seen) {
        defer_active_.store(false);
        if (defer_count_.load() != defers) defer_active_.store(true);
      }
      defers_seen = defers;
      next_tick = now + options_.tick_ms * 1'000'000ll;
    }
    const int64_t until_next_ns = std::max<int64_t>(100'000, std::min(next_tick, next_load) - now);
    const int64_t until_tick_ms = std::max<int64_t>(1, until_next_ns / 1'000'000);
    flush_deferred();
    bool waiters = fg_waiters_.load(std::memory_order_acquire) > 0 ||
                   now - fg_last_exit_ns_.load(std::memory_order_acquire) < kParkGraceNs;
    if (waiters) {
      // A user thread is driving progress; stay out of its way.
      uint32_t w = park_word_.load();
      int64_t park_ns = std::min<int64_t>(until_next_ns, kParkGraceNs);
      if (defer_active_.load(std::memory_order_relaxed)) park_ns = std::min(park_ns, defer_bound_ns_);
      futex_wait(&park_word_, w, park_ns);
      continue;
    }
    bg_polling_.store(true, std::memory_order_release);
    int served = 0;
    if (fg_waiters_.load(std::memory_order_acquire) == 0) {
      std::lock_guard lk(block_mu_);
      poll(static_cast<int>(until_tick_ms), nullptr, &served);
    }
    bg_polling_.store(false, std::memory_order_release);
    if (served > 0) serve_spin(nullptr, std::min(next_tick, next_load));
  }
}

void ProgressEngine::serve_spin(const RequestState* req, int64_t end_ns) {
  if (options_.serve_spin_us <= 0) return;
  if (!options_.serve_when_crowded && crowded_.load(std::memory_order_relaxed)) return;
  const int64_t budget = options_.serve_spin_us * 1000ll;
  int64_t now = now_ns(), until = now + budget;
  for (unsigned spins = 0; now < until && now < end_ns; ++spins) {
    if (req != nullptr ? req->done()
                       : fg_waiters_.load(std::memory_order_acquire) > 0 || !running_.load(std::memory_order_relaxed))
      return;
    // A waiter polls on after any input (it has nothing else to do, and input on its
    // connections is what it waits among); the background thread only after a peer's
    // operation (note_served).
    int served = 0;
    const int work = poll(0, nullptr, &served);
    if (req != nullptr ? work > 0 : served > 0) until = now + budget;
    if ((spins & 3) == 3) now = now_ns();
  }
}

}  // namespace podnet::detail
