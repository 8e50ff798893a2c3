// RequestState: the first complete() wins, a callback runs exactly once with the final status
// whether it is registered before, during or after completion, and requests come from the
// per-thread pool without leaking into each other.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "transport/request.h"

namespace podnet::detail {
namespace {

TEST(RequestState, FirstCompleteWinsAndCallbackRunsOnce) {
  auto r = make_request(nullptr, "send", 7);
  int calls = 0;
  Code seen = Code::kInternal;
  r->on_complete([&](const Status& st) {
    ++calls;
    seen = st.code();
  });
  EXPECT_FALSE(r->done());
  r->complete(Status::Timeout("first"));
  r->complete(Status::Ok());
  EXPECT_TRUE(r->done());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, Code::kTimeout);
  EXPECT_EQ(r->status().code(), Code::kTimeout);
  EXPECT_EQ(r->seq(), 7u);

  int late = 0;
  r->on_complete([&](const Status& st) { late += st.code() == Code::kTimeout; });
  EXPECT_EQ(late, 1) << "a callback registered after completion runs at once";
}

// complete() and on_complete() from two threads at once, many times: exactly one run of the
// callback, always with the completed status (never a half-written one).
TEST(RequestState, CallbackRacingCompletionRunsExactlyOnce) {
  for (int i = 0; i < 20000; ++i) {
    auto r = make_request(nullptr, "recv", static_cast<uint64_t>(i));
    std::atomic<int> calls{0}, wrong{0};
    std::atomic<bool> go{false};
    std::thread t([&] {
      while (!go.load(std::memory_order_acquire)) {
      }
      r->complete(Status::PeerFailed("peer {} went away", i));
    });
    go.store(true, std::memory_order_release);
    r->on_complete([&](const Status& st) {
      calls.fetch_add(1);
      if (st.code() != Code::kPeerFailed || st.message() != fmt::format("peer {} went away", i)) wrong.fetch_add(1);
    });
    t.join();
    ASSERT_EQ(calls.load(), 1) << "iteration " << i;
    ASSERT_EQ(wrong.load(), 0) << "iteration " << i;
  }
}

TEST(RequestState, PooledRequestsStartFresh) {
  for (int i = 0; i < 1000; ++i) {
    auto r = make_request(nullptr, "write", static_cast<uint64_t>(i));
    EXPECT_FALSE(r->done());
    EXPECT_EQ(r->bytes, 0u);
    r->bytes = 99;
    if (i % 2 == 0) r->complete(Status::Ok());
  }
}

}  // namespace
}  // namespace podnet::detail
