// Payload: an unexpected eager message's bytes. Large buffers are reused from a pool (fresh
// pages cost a fault each while recv() copies into them), never handed out twice; small ones
// live in the object; the bytes and the size are what was assigned. And the matcher's queue
// of unexpected messages, which such payloads fill when a sender runs ahead.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "transport/matcher.h"
#include "transport/request.h"

namespace podnet::detail {
namespace {

TEST(Payload, AssignKeepsTheBytesAndTheSize) {
  std::vector<std::byte> src(100'000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 7);
  Payload p;
  p.assign(src.data(), src.data() + src.size());
  ASSERT_EQ(p.size(), src.size());
  EXPECT_EQ(std::memcmp(p.data(), src.data(), src.size()), 0);
  p.assign(src.data(), src.data());
  EXPECT_EQ(p.size(), 0u);
}

TEST(Payload, ALargeBufferIsReusedAfterItsPayloadIsGone) {
  std::byte* first = nullptr;
  {
    Payload p;
    p.resize(256 * 1024);
    first = p.data();
    std::memset(first, 1, p.size());
  }
  Payload q;
  q.resize(200 * 1024);  // fits the pooled buffer
  EXPECT_EQ(q.data(), first);
  EXPECT_EQ(q.size(), 200u * 1024);
}

TEST(Payload, APooledBufferIsNotHandedOutTwice) {
  std::byte* a_buf = nullptr;
  {
    Payload a;
    a.resize(Payload::kPoolMin);
    a_buf = a.data();
  }
  Payload b, c;
  b.resize(Payload::kPoolMin);
  c.resize(Payload::kPoolMin);
  EXPECT_NE(b.data(), c.data());
  EXPECT_TRUE(b.data() == a_buf || c.data() == a_buf);
}

TEST(Payload, ShrinkingKeepsTheBuffer) {
  Payload p;
  p.resize(Payload::kPoolMin);
  std::byte* buf = p.data();
  p.resize(Payload::kPoolMin / 2);
  EXPECT_EQ(p.data(), buf);
  EXPECT_EQ(p.size(), Payload::kPoolMin / 2);
}

TEST(Payload, SmallPayloadsLiveInTheObjectAndGrowOntoTheHeap) {
  Payload p;
  const std::byte* inside = reinterpret_cast<const std::byte*>(&p);
  std::vector<std::byte> src(Payload::kInline + 1);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i + 1);
  p.assign(src.data(), src.data() + Payload::kInline);
  EXPECT_TRUE(p.data() >= inside && p.data() < inside + sizeof p) << "a payload of kInline bytes is in the object";
  EXPECT_EQ(std::memcmp(p.data(), src.data(), Payload::kInline), 0);
  p.assign(src.data(), src.data() + src.size());  // one byte more: a buffer of its own
  EXPECT_FALSE(p.data() >= inside && p.data() < inside + sizeof p);
  ASSERT_EQ(p.size(), src.size());
  EXPECT_EQ(std::memcmp(p.data(), src.data(), src.size()), 0);
  p.assign(src.data(), src.data() + 3);  // shrinking keeps that buffer
  EXPECT_EQ(p.size(), 3u);
  EXPECT_EQ(std::memcmp(p.data(), src.data(), 3), 0);
}

TEST(Payload, UnexpectedMessagesReuseTheirBlocks) {
  UnexpectedMsg* first = nullptr;
  {
    auto m = make_unexpected();
    first = m.get();
    m->data.resize(8);
  }
  auto again = make_unexpected();
  EXPECT_EQ(again.get(), first) << "a freed message's block is the next one handed out on this thread";
  EXPECT_EQ(again->data.size(), 0u);
  EXPECT_FALSE(again->complete);
  EXPECT_FALSE(again->attached.has_value());
}

// At exit a thread's thread_locals go first, then the statics: a static that still holds a
// pooled message releases it after the thread's block list is gone, and the block must go
// back to the heap, not into the destroyed list. Its teeth are in the ASan stage, where the
// write into the list's freed storage aborts the child with a report; here the child must
// exit cleanly.
TEST(Payload, AMessageReleasedAtExitAfterTheBlockListIsGoneGoesBackToTheHeap) {
  fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    static std::shared_ptr<UnexpectedMsg> held;  // destroyed after the thread_locals
    held = make_unexpected();
    make_unexpected().reset();  // a block in the list: the list has storage to free
    std::exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

// Messages queue as unexpected, then receives take them in any order: each gets the bytes
// of the message its tag names, whether that message is at the front of the queue or not.
TEST(Payload, QueuedMessagesGoToTheReceivesThatNameThem) {
  TagMatcher m;
  for (uint64_t tag = 1; tag <= 4; ++tag) {
    std::shared_ptr<UnexpectedMsg> msg;
    auto posted = m.match_or_queue(tag, [&] {
      msg = make_unexpected();
      msg->tag = tag;
      msg->length = 8;
      return msg;
    });
    ASSERT_FALSE(posted.has_value());
    std::vector<std::byte> bytes(8, static_cast<std::byte>(tag * 10));
    msg->data.assign(bytes.data(), bytes.data() + bytes.size());
    ASSERT_FALSE(m.finish_unexpected(*msg).has_value());
  }
  for (uint64_t tag : {3, 1, 2, 4}) {  // from the middle, the front, the front, the last
    std::vector<std::byte> out(8);
    PostedRecv r{out.data(), out.size(), tag, ~0ull, make_request(nullptr, "recv", tag)};
    auto found = m.post(r);
    ASSERT_NE(found, nullptr) << "tag " << tag;
    EXPECT_EQ(found->tag, tag);
    deliver_eager(r, found->data.data(), found->length, found->tag);
    ASSERT_TRUE(r.req->done());
    EXPECT_TRUE(r.req->status().ok());
    EXPECT_EQ(out, std::vector<std::byte>(8, static_cast<std::byte>(tag * 10))) << "tag " << tag;
  }
  std::vector<std::byte> out(8);
  auto late_req = make_request(nullptr, "recv", 9);
  PostedRecv late{out.data(), out.size(), 1, ~0ull, late_req};
  EXPECT_EQ(m.post(late), nullptr) << "nothing is left to match: the receive is queued";
  EXPECT_FALSE(late_req->done());
}

// A receive attached to a message still arriving fails with the peer; the reader that then
// finishes the payload must not get it back (it would copy into the buffer of a receive the
// user already saw fail, and complete a request that is gone).
TEST(Payload, AReceiveAttachedToAHalfArrivedMessageFailsOnceWithThePeer) {
  TagMatcher m;
  std::shared_ptr<UnexpectedMsg> msg;
  ASSERT_FALSE(m.match_or_queue(5, [&] {
                  msg = make_unexpected();
                  msg->tag = 5;
                  msg->length = 8;
                  return msg;
                }).has_value());
  std::vector<std::byte> out(8, std::byte{0x5A});
  auto req = make_request(nullptr, "recv", 5);
  PostedRecv r{out.data(), out.size(), 5, ~0ull, req};
  ASSERT_EQ(m.post(r), nullptr) << "the message is still arriving: the receive attaches";
  m.fail(Status::PeerFailed("rank 1 died"));
  ASSERT_TRUE(req->done());
  EXPECT_EQ(req->status().code(), Code::kPeerFailed);
  EXPECT_FALSE(m.finish_unexpected(*msg).has_value()) << "the failed receive came back to the reader";
  EXPECT_EQ(out, std::vector<std::byte>(8, std::byte{0x5A}));
}

}  // namespace
}  // namespace podnet::detail
