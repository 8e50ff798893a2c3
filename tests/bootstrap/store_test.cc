// Store server and client over 127.0.0.1, ranks as threads.
#include "bootstrap/store.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>

#include "bootstrap/socket_util.h"
#include "bootstrap/store_wire.h"

namespace podnet::bootstrap {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// A port that was free a moment ago, below the kernel's ephemeral range: a port bound to 0
// and released comes from that range, where another test's outgoing connection may take it
// as its source port before the server binds it, or a connect to it may pick it and
// connect to itself.
uint16_t free_port() {
  const int lo = ephemeral_port_floor();
  const int base = lo > 11000 ? 10000 : 1024;
  if (lo <= base) {
    ADD_FAILURE() << "the ephemeral range starts at " << lo << ": no room below it";
    return 0;
  }
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> pick(base, lo - 1);
  for (int tries = 0; tries < 1000; ++tries) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(static_cast<uint16_t>(pick(rng)));
    bool ok = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    close(fd);
    if (ok) return ntohs(sa.sin_port);
  }
  ADD_FAILURE() << "no free port below " << lo;
  return 0;
}

// A plain blocking socket for speaking (or not speaking) the protocol by hand.
class RawConn {
 public:
  explicit RawConn(uint16_t port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    timeval tv{2, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawConn() { close(fd_); }
  void send_all(const std::string& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  // Everything the server sends until it closes; fails the test if it does not close in 2 s.
  std::string read_until_closed() {
    std::string out;
    char buf[4096];
    while (true) {
      ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n == 0) break;
      if (n < 0) {
        EXPECT_EQ(errno, ECONNRESET) << "server did not close the connection: " << strerror(errno);
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  int fd_;
};

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = StoreServer::start("127.0.0.1", 0);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    server_ = std::move(*s);
    client_ = connect_client();
    ASSERT_NE(client_, nullptr);
  }
  std::unique_ptr<StoreClient> connect_client() {
    auto c = StoreClient::connect(server_->address(), 2s);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? std::move(*c) : nullptr;
  }
  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<StoreClient> client_;
};

TEST_F(StoreTest, AddressNamesHostAndPort) {
  EXPECT_NE(server_->port(), 0);
  EXPECT_EQ(server_->address(), "127.0.0.1:" + std::to_string(server_->port()));
}

TEST_F(StoreTest, SetGet) {
  ASSERT_TRUE(client_->set("addr/0", "127.0.0.1:5000").ok());
  std::string binary("\0\xff\x01", 3);
  ASSERT_TRUE(client_->set("bin", binary).ok());
  EXPECT_EQ(*client_->get("addr/0"), "127.0.0.1:5000");
  EXPECT_EQ(*client_->get("bin"), binary);
  ASSERT_TRUE(client_->set("addr/0", "overwritten").ok());
  EXPECT_EQ(*client_->get("addr/0"), "overwritten");
  auto other = connect_client();
  EXPECT_EQ(*other->get("addr/0"), "overwritten");  // visible to every client
}

TEST_F(StoreTest, GetMissingKey) {
  auto r = client_->get("nope");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_TRUE(contains(r.status().message(), "get nope")) << r.status().message();
  EXPECT_TRUE(contains(r.status().message(), server_->address())) << r.status().message();
}

TEST_F(StoreTest, InvalidKeysAreRejectedByTheClient) {
  EXPECT_EQ(client_->set("", "v").code(), Code::kInvalidArgument);
  EXPECT_EQ(client_->get(std::string(wire::kMaxKeyBytes + 1, 'k')).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(client_->set("still", "usable").ok());
}

TEST_F(StoreTest, WaitSucceedsWhenAnotherClientSetsLater) {
  std::thread setter([&] {
    auto c = connect_client();
    std::this_thread::sleep_for(100ms);
    EXPECT_TRUE(c->set("late/1", "x").ok());
    std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(c->set("late/2", "y").ok());
  });
  auto start = Clock::now();
  Status s = client_->wait({"late/1", "late/2", "late/1"}, 5s);
  int64_t took = ms_since(start);
  setter.join();
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_GE(took, 140);
  EXPECT_LT(took, 2000);
  auto v = client_->wait_get("late/2", 1s);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "y");
}

TEST_F(StoreTest, WaitForPresentKeysReturnsAtOnce) {
  ASSERT_TRUE(client_->set("here", "1").ok());
  auto start = Clock::now();
  EXPECT_TRUE(client_->wait({"here"}, 5s).ok());
  // Far below the 5 s it would wait for an absent key; loose enough for a crowded CI host.
  EXPECT_LT(ms_since(start), 1000);
}

TEST_F(StoreTest, WaitTimeoutNamesMissingKeys) {
  ASSERT_TRUE(client_->set("addr/4", "x").ok());
  auto start = Clock::now();
  Status s = client_->wait({"addr/3", "addr/4", "addr/5"}, 200ms);
  int64_t took = ms_since(start);
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_EQ(s.message(), "store " + server_->address() + ": wait timed out after 200 ms for keys addr/3, addr/5");
  EXPECT_GE(took, 200);
  EXPECT_LT(took, 1500);
  // The connection is still in step: a late key produces no stray reply.
  ASSERT_TRUE(client_->set("addr/3", "y").ok());
  EXPECT_EQ(*client_->get("addr/3"), "y");
  EXPECT_TRUE(client_->wait({"addr/3", "addr/4"}, 1s).ok());
}

TEST_F(StoreTest, WaitingClientThatDisconnectsIsForgotten) {
  {
    RawConn raw(server_->port());
    raw.send_all(wire::encode({wire::Type::kHello, 0, 1, 0, {}}) +
                 wire::encode({wire::Type::kWait, 0, 2, 0, {"ghost"}}));
    std::this_thread::sleep_for(50ms);
  }
  std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(client_->set("ghost", "boo").ok());
  EXPECT_EQ(*client_->get("ghost"), "boo");
}

TEST_F(StoreTest, AddIsAtomicAcrossThreads) {
  constexpr int kThreads = 8, kAdds = 200;
  std::vector<std::vector<int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto c = connect_client();
      for (int i = 0; i < kAdds; ++i) {
        auto r = c->add("counter", 1);
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        seen[t].push_back(*r);
      }
    });
  for (auto& th : threads) th.join();
  std::vector<int64_t> all;
  for (auto& v : seen) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), size_t{kThreads * kAdds});
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], static_cast<int64_t>(i + 1));  // each value once
  EXPECT_EQ(*client_->get("counter"), std::to_string(kThreads * kAdds));
  EXPECT_EQ(*client_->add("counter", -kThreads * kAdds), 0);
}

TEST_F(StoreTest, AddOnNonIntegerIsAnError) {
  ASSERT_TRUE(client_->set("text", "hello").ok());
  auto r = client_->add("text", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(contains(r.status().message(), "\"hello\" is not an integer")) << r.status().message();
  ASSERT_TRUE(client_->set("big", std::to_string(INT64_MAX)).ok());
  EXPECT_EQ(client_->add("big", 1).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(*client_->add("fresh", 5), 5);  // the connection survives error replies
}

TEST_F(StoreTest, CompareSet) {
  // Absent and expected absent: set.
  EXPECT_EQ(*client_->compare_set("leader", std::nullopt, "rank0"), "rank0");
  // Present but expected absent: unchanged.
  EXPECT_EQ(*client_->compare_set("leader", std::nullopt, "rank1"), "rank0");
  // Expected matches: swapped.
  EXPECT_EQ(*client_->compare_set("leader", std::string("rank0"), "rank2"), "rank2");
  // Expected does not match: unchanged.
  EXPECT_EQ(*client_->compare_set("leader", std::string("rank0"), "rank3"), "rank2");
  EXPECT_EQ(*client_->get("leader"), "rank2");
  // Expected a value but the key is absent: nothing to return.
  auto r = client_->compare_set("nobody", std::string("x"), "y");
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_FALSE(client_->get("nobody").ok());
}

TEST_F(StoreTest, Erase) {
  ASSERT_TRUE(client_->set("tmp", "1").ok());
  EXPECT_TRUE(*client_->erase("tmp"));
  EXPECT_FALSE(*client_->erase("tmp"));
  EXPECT_EQ(client_->get("tmp").status().code(), Code::kUnavailable);
}

TEST_F(StoreTest, BarrierFourThreadsThreeGenerations) {
  constexpr int kRanks = 4, kGenerations = 3;
  std::atomic<int> entered{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      auto c = connect_client();
      for (int g = 0; g < kGenerations; ++g) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5 * ((r + g) % kRanks)));  // stagger arrivals
        entered.fetch_add(1);
        Status s = c->barrier("step", kRanks, 5s);
        ASSERT_TRUE(s.ok()) << s.to_string();
        // Nobody leaves generation g before all ranks entered it.
        EXPECT_GE(entered.load(), kRanks * (g + 1)) << "rank " << r << " generation " << g;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(entered.load(), kRanks * kGenerations);
}

TEST_F(StoreTest, BarrierTimeoutSaysHowManyArrived) {
  auto start = Clock::now();
  Status s = client_->barrier("lonely", 3, 200ms);
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_TRUE(contains(s.message(), "barrier lonely")) << s.message();
  EXPECT_TRUE(contains(s.message(), "1 of 3 ranks arrived")) << s.message();
  EXPECT_GE(ms_since(start), 200);
  EXPECT_LT(ms_since(start), 1500);
}

TEST(StoreConnect, RetriesUntilTheServerStarts) {
  uint16_t port = free_port();
  std::unique_ptr<StoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(300ms);
    auto s = StoreServer::start("127.0.0.1", port);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    server = std::move(*s);
  });
  auto start = Clock::now();
  auto c = StoreClient::connect("127.0.0.1:" + std::to_string(port), 5s);
  int64_t took = ms_since(start);
  starter.join();
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_GE(took, 250);
  EXPECT_LT(took, 2500);
  EXPECT_TRUE((*c)->set("k", "v").ok());
}

TEST(StoreConnect, TimesOutOnAClosedPort) {
  uint16_t port = free_port();
  std::string address = "127.0.0.1:" + std::to_string(port);
  auto start = Clock::now();
  auto c = StoreClient::connect(address, 300ms);
  int64_t took = ms_since(start);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kTimeout);
  const std::string& m = c.status().message();
  EXPECT_TRUE(contains(m, "store " + address + ": connect timed out after 300 ms")) << m;
  EXPECT_TRUE(contains(m, "Connection refused")) << m;
  EXPECT_GE(took, 300);
  EXPECT_LT(took, 1500);
}

TEST(StoreConnect, BadAddress) {
  for (std::string a : {"127.0.0.1", ":5000", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:x"}) {
    auto c = StoreClient::connect(a, 100ms);
    ASSERT_FALSE(c.ok()) << a;
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << a;
  }
}

TEST(StoreServerStart, PortInUse) {
  auto first = StoreServer::start("127.0.0.1", 0);
  ASSERT_TRUE(first.ok());
  auto second = StoreServer::start("127.0.0.1", (*first)->port());
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(contains(second.status().message(), "bind: Address already in use")) << second.status().message();
}

TEST_F(StoreTest, RandomBytesAreDroppedAndTheServerKeepsServing) {
  std::mt19937 rng(2024);
  std::string garbage(4096, '\0');
  for (auto& ch : garbage) ch = static_cast<char>(rng());
  {
    RawConn raw(server_->port());
    raw.send_all(garbage);
    raw.read_until_closed();
  }
  // Garbage behind a valid magic and version reaches the field checks.
  for (int i = 0; i < 20; ++i) {
    std::string bytes = wire::encode({wire::Type::kHello, 0, 1, 0, {}}).substr(0, 6);
    for (int j = 0; j < 200; ++j) bytes.push_back(static_cast<char>(rng()));
    RawConn raw(server_->port());
    raw.send_all(bytes);
    raw.read_until_closed();
  }
  {  // A request before hello.
    RawConn raw(server_->port());
    raw.send_all(wire::encode({wire::Type::kGet, 0, 1, 0, {"k"}}));
    std::string reply = raw.read_until_closed();
    wire::Decoded d = wire::decode(reply);
    ASSERT_EQ(d.kind, wire::Decoded::Kind::kFrame);
    EXPECT_TRUE(contains(d.frame.strs[0], "first frame must be hello")) << d.frame.strs[0];
  }
  ASSERT_TRUE(client_->set("after", "garbage").ok());
  auto fresh = connect_client();
  EXPECT_EQ(*fresh->get("after"), "garbage");
}

TEST_F(StoreTest, MutatedRequestsAfterHelloNeverHurtTheServer) {
  std::mt19937 rng(7);
  const std::vector<wire::Frame> seeds = {
      {wire::Type::kSet, 0, 2, 0, {"k", "v"}},        {wire::Type::kGet, 0, 3, 0, {"k"}},
      {wire::Type::kWait, 0, 4, 0, {"k", "w"}},       {wire::Type::kCancelWait, 0, 5, 4, {}},
      {wire::Type::kAdd, 0, 6, 1, {"n"}},             {wire::Type::kCompareSet, 0, 7, 1, {"k", "v", "x"}},
      {wire::Type::kErase, 0, 8, 0, {"k"}},
  };
  RawConn stalled(server_->port());  // a half-sent header must not block anyone else
  stalled.send_all(wire::encode({wire::Type::kHello, 0, 1, 0, {}}).substr(0, 10));
  for (int i = 0; i < 100; ++i) {
    std::string bytes = wire::encode({wire::Type::kHello, 0, 1, 0, {}});
    for (int j = 0; j < 5; ++j) {
      std::string f = wire::encode(seeds[rng() % seeds.size()]);
      f[rng() % f.size()] = static_cast<char>(rng());
      bytes += f;
    }
    RawConn raw(server_->port());
    raw.send_all(bytes);
  }
  std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(client_->set("alive", "yes").ok());
  EXPECT_EQ(*connect_client()->get("alive"), "yes");
}

TEST_F(StoreTest, WrongVersionHelloIsRefusedNamingBothVersions) {
  RawConn raw(server_->port());
  raw.send_all(wire::encode({wire::Type::kHello, 0, 1, 0, {}}, /*version=*/99));
  std::string reply = raw.read_until_closed();
  wire::Decoded d = wire::decode(reply);
  ASSERT_EQ(d.kind, wire::Decoded::Kind::kFrame) << d.error.message();
  EXPECT_EQ(d.frame.type, wire::Type::kError);
  EXPECT_EQ(d.frame.num, static_cast<int64_t>(Code::kProtocol));
  const std::string& m = d.frame.strs[0];
  EXPECT_TRUE(contains(m, "speaks protocol version 1")) << m;
  EXPECT_TRUE(contains(m, "sent version 99")) << m;
  EXPECT_TRUE(client_->set("still", "serving").ok());
}

TEST_F(StoreTest, StoppedServerFailsClientsLoudly) {
  server_->stop();
  server_->stop();  // idempotent
  Status s = client_->set("k", "v");
  EXPECT_EQ(s.code(), Code::kPeerFailed);
  EXPECT_TRUE(contains(s.message(), "store " + server_->address() + ": set k: ")) << s.message();
  auto again = client_->get("k");  // the first failure is sticky
  EXPECT_EQ(again.status().code(), Code::kPeerFailed);
  EXPECT_TRUE(contains(again.status().message(), "unusable after an earlier error")) << again.status().message();
}

}  // namespace
}  // namespace podnet::bootstrap
