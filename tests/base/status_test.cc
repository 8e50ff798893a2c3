#include <podnet/status.h>

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace podnet {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status st;
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(st.code(), Code::kOk);
  EXPECT_EQ(st.message(), "");
  EXPECT_EQ(st.to_string(), "ok");
  EXPECT_TRUE(Status::Ok().ok());
}

TEST(StatusTest, FactoriesSetCodeAndFormatMessage) {
  Status st = Status::PeerFailed("rank {} ({}): recv: {}", 3, "10.0.0.2:4000", "Connection reset by peer");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kPeerFailed);
  EXPECT_EQ(st.message(), "rank 3 (10.0.0.2:4000): recv: Connection reset by peer");
  EXPECT_EQ(st.to_string(), "peer-failed: rank 3 (10.0.0.2:4000): recv: Connection reset by peer");

  EXPECT_EQ(Status::InvalidArgument("x").code(), Code::kInvalidArgument);
  EXPECT_EQ(Status::Timeout("x").code(), Code::kTimeout);
  EXPECT_EQ(Status::Unavailable("x").code(), Code::kUnavailable);
  EXPECT_EQ(Status::AccessDenied("x").code(), Code::kAccessDenied);
  EXPECT_EQ(Status::Protocol("x").code(), Code::kProtocol);
  EXPECT_EQ(Status::TransportFailed("x").code(), Code::kTransportFailed);
  EXPECT_EQ(Status::Cancelled("x").code(), Code::kCancelled);
  EXPECT_EQ(Status::Internal("x").code(), Code::kInternal);
  EXPECT_EQ(Status::Make(Code::kTimeout, "wait {} ms", 5).to_string(), "timeout: wait 5 ms");
}

TEST(StatusTest, EveryCodeHasADistinctName) {
  const Code codes[] = {Code::kOk, Code::kInvalidArgument, Code::kTimeout, Code::kUnavailable,
                        Code::kAccessDenied, Code::kProtocol, Code::kPeerFailed,
                        Code::kTransportFailed, Code::kCancelled, Code::kInternal};
  EXPECT_EQ(code_name(Code::kOk), "ok");
  EXPECT_EQ(code_name(Code::kInvalidArgument), "invalid-argument");
  EXPECT_EQ(code_name(Code::kTransportFailed), "transport-failed");
  for (Code a : codes) {
    EXPECT_NE(code_name(a), "unknown");
    for (Code b : codes)
      if (a != b) {
        EXPECT_NE(code_name(a), code_name(b));
      }
  }
  EXPECT_EQ(code_name(static_cast<Code>(999)), "unknown");
}

TEST(StatusTest, WithContextPrependsAndKeepsCode) {
  Status st = Status::Timeout("wait: 100 ms").with_context("allreduce seq {}", 42);
  EXPECT_EQ(st.code(), Code::kTimeout);
  EXPECT_EQ(st.message(), "allreduce seq 42: wait: 100 ms");
  Status outer = st.with_context("rank {}", 1);
  EXPECT_EQ(outer.to_string(), "timeout: rank 1: allreduce seq 42: wait: 100 ms");
  // Context never turns success into an error.
  Status ok = Status::Ok().with_context("anything");
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.message(), "");
}

TEST(ResultTest, HoldsValue) {
  Result<int> good = 7;
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(static_cast<bool>(good));
  EXPECT_EQ(*good, 7);
  EXPECT_EQ(good.value(), 7);
}

// Kept apart from the test above: GCC 12 -O2 reports a false -Wmaybe-uninitialized from
// std::variant<int, Status>'s destructor when a Result<int> shares a longer test body.
TEST(ResultTest, StatusOfAValueIsOk) {
  Result<std::string> text = std::string("x");
  EXPECT_TRUE(text.status().ok());
  EXPECT_EQ(text.status().code(), Code::kOk);
}

TEST(ResultTest, HoldsStatusWhenNotOk) {
  Result<int> bad = Status::Unavailable("no device");
  EXPECT_FALSE(bad.ok());
  EXPECT_FALSE(static_cast<bool>(bad));
  EXPECT_EQ(bad.status().code(), Code::kUnavailable);
  EXPECT_EQ(bad.status().message(), "no device");
}

TEST(ResultTest, MovesOutMoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(5);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 5);

  Result<std::string> s = std::string("abc");
  EXPECT_EQ(s->size(), 3u);
}

Result<int> parse_positive(int v) {
  if (v <= 0) return Status::InvalidArgument("{} is not positive", v);
  return v;
}

Status check_even(int v) {
  if (v % 2 != 0) return Status::InvalidArgument("{} is odd", v);
  return Status::Ok();
}

// Uses both macros twice in one function, so their hidden names must not collide.
Result<int> sum_even_positives(int a, int b, int* steps) {
  PODNET_ASSIGN_OR_RETURN(int x, parse_positive(a));
  ++*steps;
  PODNET_RETURN_IF_ERROR(check_even(x));
  ++*steps;
  PODNET_ASSIGN_OR_RETURN(int y, parse_positive(b));
  ++*steps;
  PODNET_RETURN_IF_ERROR(check_even(y));
  ++*steps;
  return x + y;
}

TEST(ResultTest, MacrosReturnEarlyWithTheFirstError) {
  int steps = 0;
  Result<int> r = sum_even_positives(2, 4, &steps);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 6);
  EXPECT_EQ(steps, 4);

  steps = 0;
  r = sum_even_positives(-1, 4, &steps);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "-1 is not positive");
  EXPECT_EQ(steps, 0);

  steps = 0;
  r = sum_even_positives(3, 4, &steps);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "3 is odd");
  EXPECT_EQ(steps, 1);

  steps = 0;
  r = sum_even_positives(2, 0, &steps);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "0 is not positive");
  EXPECT_EQ(steps, 2);

  steps = 0;
  r = sum_even_positives(2, 5, &steps);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "5 is odd");
  EXPECT_EQ(steps, 3);
}

Status returns_status_from_result(int v) {
  PODNET_ASSIGN_OR_RETURN(int x, parse_positive(v));
  (void)x;
  return Status::Ok();
}

TEST(ResultTest, AssignOrReturnWorksInStatusFunctions) {
  EXPECT_TRUE(returns_status_from_result(1).ok());
  Status st = returns_status_from_result(0);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "0 is not positive");
}

}  // namespace
}  // namespace podnet
