// StoreState without sockets: which replies go to which connection, and when.
#include "bootstrap/store_state.h"

#include <gtest/gtest.h>

namespace podnet::bootstrap {
namespace {

using wire::Frame;
using wire::Type;

struct Sent {
  uint64_t conn;
  Frame frame;
};

class StoreStateTest : public ::testing::Test {
 protected:
  StoreState state_{[this](uint64_t conn, Frame f) { sent_.push_back({conn, std::move(f)}); }};
  std::vector<Sent> sent_;

  Status request(uint64_t conn, Frame f) { return state_.handle(conn, f); }
  std::vector<Sent> take() { return std::exchange(sent_, {}); }
};

TEST_F(StoreStateTest, SetCompletesAnotherConnectionsWait) {
  ASSERT_TRUE(request(1, {Type::kWait, 0, 7, 0, {"a", "b"}}).ok());
  EXPECT_TRUE(take().empty());
  ASSERT_TRUE(request(2, {Type::kSet, 0, 1, 0, {"a", "1"}}).ok());
  auto s = take();
  ASSERT_EQ(s.size(), 1u);  // only the set's own reply
  EXPECT_EQ(s[0].conn, 2u);
  ASSERT_TRUE(request(2, {Type::kAdd, 0, 2, 5, {"b"}}).ok());
  s = take();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].conn, 2u);
  EXPECT_EQ(s[0].frame.type, Type::kInt);
  EXPECT_EQ(s[1].conn, 1u);
  EXPECT_EQ(s[1].frame.type, Type::kOk);
  EXPECT_EQ(s[1].frame.seq, 7u);
}

TEST_F(StoreStateTest, CancelAnswersTheWaitFirst) {
  ASSERT_TRUE(request(1, {Type::kSet, 0, 1, 0, {"here", "x"}}).ok());
  ASSERT_TRUE(request(1, {Type::kWait, 0, 2, 0, {"here", "gone", "late"}}).ok());
  take();
  ASSERT_TRUE(request(1, {Type::kCancelWait, 0, 3, 2, {}}).ok());
  auto s = take();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].frame.seq, 2u);
  EXPECT_EQ(s[0].frame.type, Type::kMissing);
  EXPECT_EQ(s[0].frame.strs, (std::vector<std::string>{"gone", "late"}));
  EXPECT_EQ(s[1].frame.seq, 3u);
  EXPECT_EQ(s[1].frame.type, Type::kOk);
  // The cancelled wait is gone: creating its keys answers nobody.
  ASSERT_TRUE(request(1, {Type::kSet, 0, 4, 0, {"gone", "x"}}).ok());
  ASSERT_TRUE(request(1, {Type::kSet, 0, 5, 0, {"late", "x"}}).ok());
  EXPECT_EQ(take().size(), 2u);
}

TEST_F(StoreStateTest, CancelOfAnAnsweredWaitOnlyAcknowledges) {
  ASSERT_TRUE(request(1, {Type::kCancelWait, 0, 9, 4, {}}).ok());
  auto s = take();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].frame.seq, 9u);
}

TEST_F(StoreStateTest, DroppedConnectionsWaitsAreForgotten) {
  ASSERT_TRUE(request(1, {Type::kWait, 0, 1, 0, {"k"}}).ok());
  ASSERT_TRUE(request(2, {Type::kWait, 0, 1, 0, {"k"}}).ok());
  state_.drop_connection(1);
  ASSERT_TRUE(request(3, {Type::kSet, 0, 1, 0, {"k", "v"}}).ok());
  auto s = take();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1].conn, 2u);
}

TEST_F(StoreStateTest, DuplicatePendingWaitIsAProtocolError) {
  ASSERT_TRUE(request(1, {Type::kWait, 0, 1, 0, {"k"}}).ok());
  EXPECT_EQ(request(1, {Type::kWait, 0, 1, 0, {"k"}}).code(), Code::kProtocol);
}

TEST_F(StoreStateTest, KeyErasedAndSetAgainCountsOnce) {
  ASSERT_TRUE(request(1, {Type::kWait, 0, 1, 0, {"a", "b"}}).ok());
  ASSERT_TRUE(request(2, {Type::kSet, 0, 1, 0, {"a", "v"}}).ok());
  ASSERT_TRUE(request(2, {Type::kErase, 0, 2, 0, {"a"}}).ok());
  ASSERT_TRUE(request(2, {Type::kSet, 0, 3, 0, {"a", "v"}}).ok());
  for (const Sent& s : take()) EXPECT_EQ(s.conn, 2u) << "the wait must not complete without b";
}

}  // namespace
}  // namespace podnet::bootstrap
