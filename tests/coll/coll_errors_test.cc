// Mismatched calls and abort(): every rank returns an error within the collective timeout
// (never a hang), the errors name the mismatch and the ranks involved, and no rank returns
// success with data mixed across the mismatch.
//
// The timeout (PODNET_COLL_TIMEOUT_MS) is a knob read once per process, so it is set here
// before anything reads the configuration. After a mismatch a communicator's state is
// undefined: every case builds its own pod, and the buffers outlive it (receives posted by a
// failed call may still be pending when the call returns).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "base/config.h"
#include "coll_harness.h"

namespace podnet::testing {
namespace {

constexpr int kTimeoutMs = 2000;
[[maybe_unused]] const bool kTimeoutSet = [] { return ::setenv("PODNET_COLL_TIMEOUT_MS", "2000", 1) == 0; }();
// Generous: a few timeouts in a row plus a loaded host; a hang would take forever.
constexpr double kBoundSeconds = 4.0 * kTimeoutMs / 1000 + 6.0;

struct Outcome {
  Status st;
  double seconds = 0;
};

std::string show(const std::vector<Outcome>& out) {
  std::string s;
  for (size_t r = 0; r < out.size(); ++r)
    s += "\n  rank " + std::to_string(r) + " (" + std::to_string(out[r].seconds).substr(0, 5) + " s): " +
         (out[r].st.ok() ? "ok" : out[r].st.to_string());
  return s;
}

using RankFn = std::function<Status(Communicator&, int rank, int32_t* a, int32_t* b)>;

// A hang is reported as one, not left to the test runner's timeout: past the deadline the
// process says which ranks are still inside their call and exits.
class Watchdog {
 public:
  Watchdog(double seconds, const std::vector<std::atomic<bool>>& done) {
    thread_ = std::thread([this, seconds, &done] {
      std::unique_lock lk(mu_);
      if (cv_.wait_for(lk, std::chrono::duration<double>(seconds), [this] { return stop_; })) return;
      std::string stuck;
      for (size_t r = 0; r < done.size(); ++r)
        if (!done[r]) stuck += " " + std::to_string(r);
      std::fprintf(stderr, "HANG: ranks%s still in their call after %.0f s\n", stuck.c_str(), seconds);
      std::fflush(stderr);
      std::_Exit(3);
    });
  }
  ~Watchdog() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// Runs fn on every rank of a fresh pod of n; a and b are 4096-element buffers per rank.
std::vector<Outcome> run_pod(int n, const RankFn& fn) {
  EXPECT_TRUE(kTimeoutSet);
  EXPECT_EQ(config().coll_timeout_ms, kTimeoutMs) << "PODNET_COLL_TIMEOUT_MS was read before this file set it";
  std::vector<std::vector<int32_t>> a(n, std::vector<int32_t>(4096, 1)), b(n, std::vector<int32_t>(4096, 1));
  std::vector<Outcome> out(n);
  {
    Pod pod(n);
    std::vector<std::atomic<bool>> done(n);
    Watchdog watchdog(3 * kBoundSeconds, done);
    pod.run([&](int r) {
      auto t0 = std::chrono::steady_clock::now();
      out[r].st = fn(pod.comm(r), r, a[r].data(), b[r].data());
      out[r].seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      done[r] = true;
    });
  }
  return out;
}

bool contains_all(const std::string& s, const std::vector<std::string>& words) {
  for (const auto& w : words)
    if (s.find(w) == std::string::npos) return false;
  return true;
}

// The checks every mismatch must pass:
// - no rank takes longer than the bound (no hang);
// - every error is kInvalidArgument (a mismatch seen), kTimeout (a peer that never came) or
//   kCancelled (another rank's error, passed on) and names a rank;
// - the ranks in `must_fail` fail (their results would mix data across the mismatch);
// - some rank reports the mismatch itself: kInvalidArgument naming `words` and the culprit
//   (or, reported by the culprit, any other rank).
void expect_reported(const std::vector<Outcome>& out, int culprit, const std::vector<int>& must_fail,
                     const std::vector<std::string>& words) {
  SCOPED_TRACE("outcomes:" + show(out));
  ::testing::Test::RecordProperty("outcomes", show(out));  // in --gtest_output=xml
  bool named = false;
  for (size_t r = 0; r < out.size(); ++r) {
    const Status& st = out[r].st;
    EXPECT_LT(out[r].seconds, kBoundSeconds) << "rank " << r << " took too long";
    if (st.ok()) continue;
    EXPECT_TRUE(st.code() == Code::kInvalidArgument || st.code() == Code::kTimeout || st.code() == Code::kCancelled)
        << "rank " << r;
    EXPECT_NE(st.message().find("rank "), std::string::npos) << "rank " << r << "'s error names no rank";
    std::string peer = "rank " + std::to_string(culprit) + " ";
    bool names_peer = static_cast<int>(r) == culprit ? st.message().find("rank ") != std::string::npos
                                                     : st.message().find(peer) != std::string::npos;
    if (st.code() == Code::kInvalidArgument && names_peer && contains_all(st.message(), words)) named = true;
  }
  for (int r : must_fail) EXPECT_FALSE(out[r].st.ok()) << "rank " << r << " returned ok across a mismatch";
  std::string want;
  for (const auto& w : words) want += " '" + w + "'";
  EXPECT_TRUE(named) << "no rank reported the mismatch (kInvalidArgument naming rank " << culprit << " and" << want
                     << ")";
}

std::vector<int> all_ranks(int n) {
  std::vector<int> v(n);
  for (int r = 0; r < n; ++r) v[r] = r;
  return v;
}

const char* const kAllreduceAlgos[] = {"ring", "recursive_doubling", "rabenseifner", "tree", "one_shot", "shm", "cma"};

struct CollMismatch : ::testing::TestWithParam<const char*> {
  // Forces the allreduce algorithm on every rank, then runs fn.
  std::vector<Outcome> run(int n, const RankFn& fn) {
    const std::string algo = GetParam();
    return run_pod(n, [&](Communicator& c, int r, int32_t* a, int32_t* b) {
      Status s = c.set_algorithm(Collective::kAllreduce, algo);
      if (!s.ok()) return s;
      return fn(c, r, a, b);
    });
  }
};
INSTANTIATE_TEST_SUITE_P(Allreduce, CollMismatch, ::testing::ValuesIn(kAllreduceAlgos));

TEST_P(CollMismatch, OtherCollective) {
  auto out = run(4, [](Communicator& c, int r, int32_t* a, int32_t* b) {
    if (r == 1) return c.broadcast(a, 64, DataType::kInt32, 0);
    return c.allreduce(a, b, 64, DataType::kInt32, ReduceOp::kSum);
  });
  expect_reported(out, 1, all_ranks(4), {"broadcast", "allreduce"});
}

TEST_P(CollMismatch, OtherCount) {
  auto out = run(4, [](Communicator& c, int r, int32_t* a, int32_t* b) {
    return c.allreduce(a, b, r == 1 ? 96 : 64, DataType::kInt32, ReduceOp::kSum);
  });
  expect_reported(out, 1, all_ranks(4), {"count"});
}

TEST_P(CollMismatch, OtherType) {
  // Same element size: only the type tells the calls apart.
  auto out = run(4, [](Communicator& c, int r, int32_t* a, int32_t* b) {
    return c.allreduce(a, b, 64, r == 1 ? DataType::kFloat32 : DataType::kInt32, ReduceOp::kSum);
  });
  expect_reported(out, 1, all_ranks(4), {"float", "int32"});
}

TEST_P(CollMismatch, OtherOp) {
  auto out = run(4, [](Communicator& c, int r, int32_t* a, int32_t* b) {
    return c.allreduce(a, b, 64, DataType::kInt32, r == 1 ? ReduceOp::kMax : ReduceOp::kSum);
  });
  expect_reported(out, 1, all_ranks(4), {"max", "sum"});
}

// Payloads up to 32 bytes go through the arena's line pages (up to 8 bytes in 32-byte
// entries, two calls to a cache line; up to 32 in 64-byte ones): a count that keeps a rank
// in the same kind of entry, one that moves it to the other page, and another type of the
// same size must each be reported, not read as the others' data.
TEST(CollMismatchArenaEntries, OtherCountOrType) {
  struct Row {
    size_t count;  // rank 1's (the others: 2 int32, an 8-byte payload)
    DataType type;
    std::vector<std::string> words;
  };
  const Row rows[] = {{1, DataType::kInt32, {"count"}},  // 4 bytes: also a 32-byte entry
                      {8, DataType::kInt32, {"count"}},  // 32 bytes: the 64-byte entries
                      {2, DataType::kFloat32, {"float", "int32"}}};
  for (const Row& row : rows) {
    SCOPED_TRACE("rank 1: count " + std::to_string(row.count) + " " + std::string(dtype_name(row.type)));
    auto out = run_pod(4, [&](Communicator& c, int r, int32_t* a, int32_t* b) {
      Status s = c.set_algorithm(Collective::kAllreduce, "shm");
      if (!s.ok()) return s;
      return c.allreduce(a, b, r == 1 ? row.count : 2, r == 1 ? row.type : DataType::kInt32, ReduceOp::kSum);
    });
    expect_reported(out, 1, all_ranks(4), row.words);
  }
}

// Two ranks, where every rank must hear from the other: each one must fail.
TEST(CollMismatchTwoRanks, OtherCollectiveEitherSide) {
  auto out = run_pod(2, [](Communicator& c, int r, int32_t* a, int32_t* b) {
    if (r == 1) return c.alltoall(a, b, 16, DataType::kInt32);
    return c.allgather(a, b, 16, DataType::kInt32);
  });
  expect_reported(out, 1, {0, 1}, {"alltoall", "allgather"});
}

// The direct reads (algorithm "cma") exchange only addresses through the arena, with the
// call's signature: a rank with another count is named, and nobody reads past a buffer.
TEST(CollMismatchDirectReads, OtherCount) {
  for (Collective coll : {Collective::kAllgather, Collective::kAlltoall}) {
    SCOPED_TRACE(collective_name(coll));
    auto out = run_pod(4, [&](Communicator& c, int r, int32_t* a, int32_t* b) {
      Status s = c.set_algorithm(coll, "cma");
      if (!s.ok()) return s;
      const size_t count = r == 1 ? 24 : 16;
      return coll == Collective::kAllgather ? c.allgather(a, b, count, DataType::kInt32)
                                            : c.alltoall(a, b, count, DataType::kInt32);
    });
    expect_reported(out, 1, all_ranks(4), {"count"});
  }
}

// reduce with another root: the two ranks that think they are root must fail (neither has
// the whole reduction); other ranks may finish their part.
TEST(CollMismatchRoot, ReduceOtherRoot) {
  for (int n : {2, 4}) {
    SCOPED_TRACE("n " + std::to_string(n));
    auto out = run_pod(n, [](Communicator& c, int r, int32_t* a, int32_t* b) {
      return c.reduce(a, b, 64, DataType::kInt32, ReduceOp::kSum, r == 1 ? 1 : 0);
    });
    expect_reported(out, 1, {0, 1}, {"root"});
  }
}

// broadcast with another root: a known limitation (docs/collectives.md). A rank that wrongly
// believes it is the root only sends (or posts, in the arena), so it cannot learn about the
// mismatch without making every broadcast wait for its readers, and it returns ok with its
// own buffer untouched. What is guaranteed, and checked here: no hang, no rank that returns
// ok holds bytes of two roots (the others hold root 0's data), and an error, where a rank
// sees one (a rank whose tree parent is the wrong root), names the call.
TEST(CollMismatchRoot, BroadcastOtherRootNeverHangsOrMixesData) {
  for (int n : {2, 3, 4, 8}) {
    SCOPED_TRACE("n " + std::to_string(n));
    constexpr int kCount = 64;
    auto out = run_pod(n, [](Communicator& c, int r, int32_t* a, int32_t*) {
      for (int i = 0; i < kCount; ++i) a[i] = 1000 * r + i;
      const int root = r == 1 ? 1 : 0;
      Status st = c.broadcast(a, kCount, DataType::kInt32, root);
      if (!st.ok()) return st;
      for (int i = 0; i < kCount; ++i)
        if (a[i] != 1000 * root + i)
          return Status::Internal("rank {} returned ok holding element {} = {} (root {} sent {})", r, i, a[i], root,
                                  1000 * root + i);
      return Status::Ok();
    });
    SCOPED_TRACE("outcomes:" + show(out));
    for (size_t r = 0; r < out.size(); ++r) {
      EXPECT_LT(out[r].seconds, kBoundSeconds) << "rank " << r;
      const Status& st = out[r].st;
      if (st.ok()) continue;
      EXPECT_NE(st.code(), Code::kInternal) << st.to_string();
      EXPECT_TRUE(st.code() == Code::kInvalidArgument || st.code() == Code::kTimeout || st.code() == Code::kCancelled)
          << st.to_string();
      EXPECT_NE(st.message().find("broadcast"), std::string::npos) << st.to_string();
    }
  }
}

// Point to point: the receiver is told what the sender did.
TEST(CollMismatchSendRecv, OtherCountOrType) {
  struct Row { size_t send_count, recv_count; DataType send_type, recv_type; std::vector<std::string> words; };
  const Row rows[] = {{128, 64, DataType::kInt32, DataType::kInt32, {"count"}},
                      {64, 128, DataType::kInt32, DataType::kInt32, {"count"}},
                      {64, 64, DataType::kFloat32, DataType::kInt32, {"float", "int32"}}};
  for (const Row& row : rows) {
    auto out = run_pod(2, [&](Communicator& c, int r, int32_t* a, int32_t* b) {
      if (r == 0) return c.send(a, row.send_count, row.send_type, 1);
      return c.recv(b, row.recv_count, row.recv_type, 0);
    });
    SCOPED_TRACE("send " + std::to_string(row.send_count) + " recv " + std::to_string(row.recv_count));
    expect_reported(out, 0, {1}, row.words);
  }
}

// abort(): the aborting rank's calls fail at once with "aborted"; the ranks that wait for
// it in allreduce fail within the timeout (or sooner, if told) with an error naming a rank.
TEST(CollAbort, PeersFailWithinTheTimeoutAndAbortedRankFailsAtOnce) {
  const int n = 4;
  auto out = run_pod(n, [](Communicator& c, int r, int32_t* a, int32_t* b) {
    if (r == 2) {
      c.abort(Status::Cancelled("test aborts rank 2"));
      auto t0 = std::chrono::steady_clock::now();
      Status st = c.allreduce(a, b, 64, DataType::kInt32, ReduceOp::kSum);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_LT(s, 0.5) << "an aborted communicator must fail at once";
      Status st2 = c.barrier();
      EXPECT_FALSE(st2.ok());
      EXPECT_NE(st2.message().find("aborted"), std::string::npos) << st2.to_string();
      Work w = c.iallreduce(a, b, 64, DataType::kInt32, ReduceOp::kSum);
      Status st3 = w.wait(std::chrono::seconds(5));
      EXPECT_FALSE(st3.ok());
      EXPECT_NE(st3.message().find("aborted"), std::string::npos) << st3.to_string();
      return st;
    }
    return c.allreduce(a, b, 64, DataType::kInt32, ReduceOp::kSum);
  });
  SCOPED_TRACE("outcomes:" + show(out));
  for (int r = 0; r < n; ++r) {
    EXPECT_FALSE(out[r].st.ok()) << "rank " << r;
    EXPECT_LT(out[r].seconds, kBoundSeconds) << "rank " << r;
  }
  EXPECT_NE(out[2].st.message().find("aborted"), std::string::npos);
  EXPECT_NE(out[2].st.message().find("test aborts rank 2"), std::string::npos) << "abort's reason is kept";
  for (int r : {0, 1, 3}) {
    EXPECT_LT(out[r].seconds, kTimeoutMs / 1000.0 + 3.0) << "rank " << r << " was not failed within the timeout";
    Code code = out[r].st.code();
    EXPECT_TRUE(code == Code::kTimeout || code == Code::kCancelled || code == Code::kPeerFailed) << "rank " << r;
    EXPECT_NE(out[r].st.message().find("rank "), std::string::npos) << "rank " << r;
  }
}

// abort() from another thread while this rank waits in allreduce: the wait ends promptly,
// long before the timeout.
TEST(CollAbort, FromAnotherThreadEndsAPendingCall) {
  const int n = 3;
  auto out = run_pod(n, [](Communicator& c, int r, int32_t* a, int32_t* b) {
    if (r == 1) return Status::Cancelled("rank 1 never calls");
    if (r == 0) {
      std::thread aborter([&c] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        c.abort(Status::Cancelled("operator abort"));
      });
      Status st = c.allreduce(a, b, 64, DataType::kInt32, ReduceOp::kSum);
      aborter.join();
      return st;
    }
    return c.allreduce(a, b, 64, DataType::kInt32, ReduceOp::kSum);
  });
  SCOPED_TRACE("outcomes:" + show(out));
  EXPECT_FALSE(out[0].st.ok());
  EXPECT_NE(out[0].st.message().find("aborted"), std::string::npos);
  EXPECT_LT(out[0].seconds, kTimeoutMs / 1000.0 * 0.8) << "abort must end the wait before the timeout";
  EXPECT_FALSE(out[2].st.ok());
  EXPECT_LT(out[2].seconds, kBoundSeconds);
}

// Races between calls, not mismatches: a correct program must not fail.

// set_algorithm after a non-blocking call must not change the algorithm of that queued call:
// otherwise when the worker reaches the call decides the algorithm, and ranks whose workers
// get there before / after the change run different algorithms. Rank 0's worker reaches
// the allreduce (behind a barrier that waits for rank 1) before rank 0 changes the
// algorithm; rank 1 changes it while its worker is still in the barrier.
TEST(CollRaces, SetAlgorithmAfterPostingDoesNotChangeTheQueuedCall) {
  auto out = run_pod(2, [](Communicator& c, int r, int32_t* a, int32_t* b) {
    Status st = c.set_algorithm(Collective::kAllreduce, "recursive_doubling");
    if (!st.ok()) return st;
    for (int i = 0; i < 64; ++i) a[i] = r + i;
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Work w0 = c.ibarrier();
    Work w1 = c.iallreduce(a, b, 64, DataType::kInt32, ReduceOp::kSum);
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    st = c.set_algorithm(Collective::kAllreduce, "ring");  // for later calls
    if (!st.ok()) return st;
    if (st = w0.wait(); !st.ok()) return st;
    if (st = w1.wait(); !st.ok()) return st;
    for (int i = 0; i < 64; ++i)
      if (b[i] != 1 + 2 * i) return Status::Internal("element {} is {}, expected {}", i, b[i], 1 + 2 * i);
    return Status::Ok();
  });
  SCOPED_TRACE("outcomes:" + show(out));
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(out[r].st.ok()) << "rank " << r;
}

// Point-to-point messages carry sequence number 0 in their tag; collective sequence numbers
// are 14 bits and wrap to 0 after 16384 calls. A message sent with send() and not yet
// received must not be taken by the collective that wraps (nor that collective's message by
// the later recv()).
TEST(CollRaces, CollectiveSequenceWrapDoesNotMatchAPendingSend) {
  auto out = run_pod(2, [](Communicator& c, int r, int32_t* a, int32_t* b) {
    a[0] = 1000 + r;
    Status st;
    if (r == 0 && !(st = c.send(a, 1, DataType::kInt32, 1)).ok()) return st;
    for (int i = 1; i < 16384; ++i)
      if (!(st = c.barrier()).ok()) return st.with_context("barrier {}", i);
    // Call 16384: pairwise alltoall, whose step 1 equals the pending message's.
    if (!(st = c.set_algorithm(Collective::kAlltoall, "pairwise")).ok()) return st;
    a[0] = 10 * r, a[1] = 10 * r + 1;
    if (!(st = c.alltoall(a, b, 1, DataType::kInt32)).ok()) return st.with_context("alltoall after the wrap");
    if (b[0] != r || b[1] != 10 + r) return Status::Internal("alltoall got {} {}", b[0], b[1]);
    if (r == 1) {
      if (!(st = c.recv(b, 1, DataType::kInt32, 0)).ok()) return st.with_context("recv after the wrap");
      if (b[0] != 1000) return Status::Internal("recv got {}, expected 1000", b[0]);
    }
    return Status::Ok();
  });
  SCOPED_TRACE("outcomes:" + show(out));
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(out[r].st.ok()) << "rank " << r;
}

}  // namespace
}  // namespace podnet::testing
