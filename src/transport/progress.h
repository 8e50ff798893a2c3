// One progress engine per context: an epoll set that every transport registers its file
// descriptors with, a background thread that drives progress while nobody waits, and the
// wait policy (spin briefly, then block) that user threads follow.
//
// Who polls: a thread waiting on a request polls the sockets itself (so a reply is handled
// on the thread that wants it, with no hand-off); while any thread waits, the background
// thread stays out of epoll and only runs housekeeping. With no waiter, the background
// thread polls. Handlers may be invoked from several threads at once; each handler
// serialises itself (try-lock) and must never block.
#pragma once

#include <podnet/status.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace podnet::detail {

class RequestState;

class EventHandler {
 public:
  virtual ~EventHandler() = default;
  // `events` are EPOLLIN/EPOLLOUT/EPOLLERR/EPOLLHUP bits. Must not block.
  virtual void on_event(uint32_t events) = 0;
  // Whether a spinning waiter should keep retrying this handler after it had input (true
  // for a connection that carries replies; false for a doorbell that only wakes pollers).
  virtual bool spin_target() const noexcept { return true; }
};

// A source of work that has no file descriptor (a shared-memory ring): polled on every
// spin turn and before and after every epoll_wait. Before the engine blocks it calls arm();
// the poller then asks its producers for a wake-up (a write to an fd in the epoll set) and
// returns false if work arrived meanwhile, so the engine does not block.
class Poller {
 public:
  virtual ~Poller() = default;
  virtual int poll() = 0;  // non-blocking; returns the number of items handled
  virtual bool arm() = 0;
  virtual void disarm() = 0;
};

// A flag that follows noisy readings only after `agree` readings in a row disagree with it
// (the engine's "host is crowded" from /proc/loadavg snapshots).
class Hysteresis {
 public:
  Hysteresis(bool initial, int agree) : value_(initial), agree_(agree) {}
  bool update(bool reading) {
    if (reading == value_) {
      disagree_ = 0;
    } else if (++disagree_ >= agree_) {
      value_ = reading;
      disagree_ = 0;
    }
    return value_;
  }
  bool value() const { return value_; }

 private:
  bool value_;
  int agree_;
  int disagree_ = 0;
};

class ProgressEngine {
 public:
  struct Options {
    int spin_us = 1000;
    // On a crowded host, after kLongWaitsToShorten waits in a row that lasted longer than
    // spin_us, waits spin this long instead (until one completes within spin_us again).
    int spin_long_us = 50;
    bool busy_poll = false;
    // A thread that blocked in epoll and woke to handle input (a waiter whose request that
    // input did not complete; the background thread only for a peer's operation, see
    // note_served()) polls this long more before it blocks again (0: never), unless the host
    // is crowded: a passive target of one-sided operations then serves the next one without
    // a wake-up.
    int serve_spin_us = 200;
    bool serve_when_crowded = false;  // tests: serve-spin on a crowded host too
    int tick_ms = 20;  // housekeeping period
    int yield_every = 4;  // spinning waiters call sched_yield() every this many turns
                          // while the host has more runnable threads than CPUs
  };
  static Result<std::unique_ptr<ProgressEngine>> create(const Options& options);
  ~ProgressEngine();
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  // Registers fd (level-triggered). The handler must outlive its registration.
  Status add(int fd, uint32_t events, EventHandler* handler);
  void modify(int fd, uint32_t events, EventHandler* handler);  // logs a failure (a bug)
  void remove(int fd, EventHandler* handler);

  // Runs on the background thread every tick, whether or not it polls. Register before
  // start(); must not block.
  void add_housekeeping(std::function<void()> fn);
  // Registers a poller (at most kMaxPollers). Register before start(); it must outlive the
  // engine's last poll.
  Status add_poller(Poller* poller);
  void start();
  void stop();  // joins the background thread; idempotent

  // Deferred output: a transport may hold a small reply (a write_notify's acknowledgement)
  // so that it leaves with the frame the notified thread posts next on that connection, as
  // TCP delays its ACKs. note_deferred() says one is held; the engine calls `fn` (set before
  // start) to send everything held at the start of every poll, when a thread starts to wait,
  // and from the background thread, which while deferrals happen parks at most `bound_ns`:
  // nothing is held longer than that when the notified thread posts nothing.
  void set_deferred_flush(std::function<void()> fn, int64_t bound_ns) {
    deferred_fn_ = std::move(fn);
    defer_bound_ns_ = bound_ns;
  }
  void note_deferred();
  // Whether the host has more runnable threads than CPUs (read from /proc/loadavg by the
  // background thread, with hysteresis; true until the first reading).
  bool crowded() const noexcept { return crowded_.load(std::memory_order_relaxed); }
  // Whether output may be deferred now: only while some thread waits (the background thread
  // then parks, with the bound above; with nobody waiting it may sit in epoll for a tick).
  bool may_defer() const noexcept {
    return defer_bound_ns_ > 0 && fg_waiters_.load(std::memory_order_relaxed) > 0;
  }
  void flush_deferred() {
    if (deferred_.load(std::memory_order_acquire) && deferred_.exchange(false, std::memory_order_acq_rel) &&
        deferred_fn_)
      deferred_fn_();
  }

  // Polls once; waits up to timeout_ms for events (0: never blocks). Returns events handled
  // (pollers' work included); *fd_events, when given, is the number of descriptor events;
  // *served, the peers' operations among them (note_served(); pollers' work counts whole).
  int poll(int timeout_ms, int* fd_events = nullptr, int* served = nullptr);
  // Called by a transport's event handler when the input it handled was a peer's operation
  // (a one-sided write or read to serve, a message, a rendezvous request): input a passive
  // side may see more of soon, which is what the background thread's serve spin is for.
  // Replies to this process's own requests (acknowledgements, read responses) are not: the
  // application thread that posted them waits and polls for them itself (or is busy posting
  // more), and a background thread that spun after each acknowledgement of a write stream
  // took a third of a CPU from the two copying threads on a 2-core host (docs/performance.md).
  static void note_served() noexcept;
  // Drives progress until the request completes or timeout_ns passes (< 0: no limit). The
  // timeout is relative so that the wait's one clock read serves as its start and deadline.
  Status wait(RequestState& request, int64_t timeout_ns);
  // An application thread found a one-sided request already complete (Request::wait returned
  // at once): it is driving this engine between its posts, so the background thread stays
  // parked as after a wait (kParkGraceNs) instead of waking for every acknowledgement and
  // taking the CPU from it. Two-sided requests call this only from 256 KiB (bulk transfers;
  // request.cc). Request::test() and Context::progress() call it before they poll: their
  // caller drives progress itself.
  void note_active() noexcept;
  // An application thread polls once instead of waiting (Context::progress, Request::test):
  // note_active(), then poll(0) once sockets are in play; while none ever had input, one
  // turn of a waiter's spin (spin_turn): the pollers every time, epoll_wait() at most every
  // 100 us, so that a thread calling this in a loop makes no system call per call while
  // only pollers (verbs completion queues, shm rings) have work (the verbs write ping-pong
  // made 13-28 epoll_wait calls per iteration before, ~1.4 us each under TCG).
  void drive();
  void wake();  // interrupts a blocked poll
  // Polls that were allowed to block (a timeout other than 0), from any thread.
  uint64_t blocking_polls() const noexcept { return blocking_polls_.load(std::memory_order_relaxed); }

 private:
  explicit ProgressEngine(const Options& options);
  void background_loop();
  // Polls after a blocked poll handled input (the background thread: served a peer's
  // operation), until serve_spin_us pass without more, end_ns comes, the engine stops, or:
  // `req` completes (a waiter), or a waiter arrives (the background thread, req == nullptr).
  void serve_spin(const RequestState* req, int64_t end_ns);
  void refresh_crowded();
  int run_pollers();
  // One turn of a spinning waiter; `turn` counts the turns of this wait (or thread).
  void spin_turn(unsigned turn, bool crowded);

  static constexpr int kMaxPollers = 4;

  Options options_;
  int epfd_ = -1;
  int wakefd_ = -1;
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::vector<std::function<void()>> housekeeping_;
  std::mutex block_mu_;                   // one thread at a time blocks in epoll_wait
  std::atomic<int> fg_waiters_{0};
  std::atomic<uint64_t> blocking_polls_{0};
  std::atomic<bool> deferred_{false};      // some transport holds deferred output
  std::atomic<bool> defer_active_{false};  // deferrals since the last tick: park briefly
  std::atomic<uint64_t> defer_count_{0};
  std::function<void()> deferred_fn_;
  int64_t defer_bound_ns_ = 200'000;
  std::atomic<int64_t> fg_last_exit_ns_{0};
  std::atomic<bool> bg_polling_{false};
  std::atomic<uint32_t> park_word_{0};
  // The handler that last had input: a spinning waiter tries it directly (one recv() instead
  // of epoll_wait() + recv() when the reply it waits for arrives there).
  std::atomic<EventHandler*> hot_{nullptr};
  unsigned yield_mask_ = 3;
  // More runnable threads than CPUs on this host (/proc/loadavg, refreshed every tick, and
  // every 2 ms in the first 0.5 s; it changes after kCrowdedAgree readings in a row say so):
  // spinning waiters then yield every yield_every turns, else only every kQuietYieldMask+1.
  std::atomic<bool> crowded_{true};
  // Waits in a row that lasted longer than spin_us (capped); on a crowded host, from
  // kLongWaitsToShorten on, waits spin only spin_long_us.
  std::atomic<int> long_waits_{0};
  Hysteresis crowded_filter_;  // the readings behind crowded_ (background thread only)
  int ncpus_ = 1;
  // A spinning waiter considers epoll_wait() every (epoll_mask_+1) turns: 8 while sockets are
  // in play (it calls it then), backing off to 64 while no socket had input and epoll finds
  // nothing. While no socket had input such a turn only reads the clock and calls it when
  // next_idle_epoll_ns_ has passed (at most every 100 us, from any thread): shm and verbs
  // waits progress through the pollers and need no system call.
  std::atomic<unsigned> epoll_mask_{7};
  std::atomic<int64_t> next_idle_epoll_ns_{0};
  Poller* pollers_[kMaxPollers] = {};
  std::atomic<int> npollers_{0};
};

}  // namespace podnet::detail
