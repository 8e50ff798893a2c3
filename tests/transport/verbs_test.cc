// The verbs transport: address fields and reachability (pure), "unavailable with a reason" on
// hosts without RDMA, and, on a real device (the soft-RoCE lab), that the NIC itself refuses
// what podnet did not grant.
#include <algorithm>
#include <filesystem>

#include "pair.h"
#include "transport/progress.h"
#include "transport/registry.h"
#include "transport/verbs/verbs.h"
#include "transport/verbs/send_queue.h"
#include "transport/verbs/slot_table.h"
#include "transport/verbs/wire.h"

namespace podnet::testing {
namespace {

bool has_rdma() { return std::filesystem::exists("/sys/class/infiniband"); }
bool over_verbs() {
  const char* t = std::getenv("PODNET_TRANSPORT");
  return t != nullptr && std::string(t) == "verbs";
}

TEST(VerbsAddress, RoundTripAndRefusals) {
  verbs::VerbsAddress a{"rxe0", 1, 3, std::string(32, 'a'), 3, 4, "10.0.0.1:4791"};
  auto b = verbs::parse_verbs_address(verbs::format_verbs_address(a));
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(b->device, "rxe0");
  EXPECT_EQ(b->gid_index, 3);
  EXPECT_EQ(b->oob, "10.0.0.1:4791");
  for (const char* bad : {"", "rxe0,1,3", "rxe0,x,3,aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa,3,4,1.2.3.4:5",
                          "rxe0,1,3,abc,3,4,1.2.3.4:5", "rxe0,1,3,aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa,3,4,nocolon"})
    EXPECT_FALSE(verbs::parse_verbs_address(bad).ok()) << bad;
}

TEST(VerbsAddress, ReachableOnlyWithADeviceOnBothSidesOfOneFamily) {
  std::string v4 = verbs::format_verbs_address({"rxe0", 1, 1, std::string(32, '0'), 3, 4, "10.0.0.1:1"});
  std::string v6 = verbs::format_verbs_address({"rxe0", 1, 0, std::string(32, 'f'), 3, 6, "10.0.0.2:1"});
  EXPECT_TRUE(verbs::verbs_reachable(v4, v4).ok());
  Status st = verbs::verbs_reachable("", v4);
  EXPECT_EQ(st.code(), Code::kUnavailable);
  EXPECT_NE(st.message().find("no usable RDMA device here"), std::string::npos) << st.message();
  st = verbs::verbs_reachable(v4, "");
  EXPECT_NE(st.message().find("the peer has no usable RDMA device"), std::string::npos) << st.message();
  st = verbs::verbs_reachable(v4, v6);
  EXPECT_NE(st.message().find("GID families differ"), std::string::npos) << st.message();
}

// The connection-setup record: data lanes are offered and accepted in it, and a bad count
// or lane number is refused before anything uses it.
TEST(VerbsWire, HelloDecoderChecksTheDataLanes) {
  verbs::Hello h;
  h.qpn = 0x11;
  h.mtu = 3;
  h.recv_depth = 8;
  h.lanes = 3;
  for (uint32_t i = 0; i < h.lanes; ++i) h.lane_qpn[i] = 0x20 + i;
  auto d = verbs::decode_hello(&h, sizeof h);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->lanes, 3u);
  EXPECT_EQ(d->lane_qpn[2], 0x22u);

  verbs::Hello too_many = h;
  too_many.lanes = verbs::kMaxLanes + 1;
  Status st = verbs::decode_hello(&too_many, sizeof too_many).status();
  EXPECT_EQ(st.code(), Code::kProtocol);
  EXPECT_NE(st.message().find("8 data lanes"), std::string::npos) << st.message();

  verbs::Hello zero_lane = h;
  zero_lane.lane_qpn[1] = 0;
  st = verbs::decode_hello(&zero_lane, sizeof zero_lane).status();
  EXPECT_NE(st.message().find("bad data lane 1"), std::string::npos) << st.message();

  verbs::Hello old = h;
  old.version = 1;  // before data lanes: a clear refusal, not a misread record
  st = verbs::decode_hello(&old, sizeof old).status();
  EXPECT_NE(st.message().find("version 1"), std::string::npos) << st.message();
  EXPECT_FALSE(verbs::decode_hello(&h, sizeof h - 1).ok());
}

// Selective signaling: unsignaled sends stay counted until a later signaled one completes,
// every kSignalEvery-th send is signaled, and so is the one that nearly fills the queue (so
// a full queue always has a completion coming).
TEST(VerbsSendQueue, SignaledCompletionRetiresTheUnsignaledRunBeforeIt) {
  verbs::SendQueueCount sq(64);
  std::vector<uint64_t> retired;
  int signaled = 0;
  for (int i = 0; i < 40; ++i) {
    bool s = sq.want_signal();
    signaled += s;
    sq.posted(s);
  }
  EXPECT_EQ(signaled, 40 / verbs::SendQueueCount::kSignalEvery);  // the 16th and the 32nd
  EXPECT_EQ(sq.used(), 40);
  sq.completed(retired);  // the 16th: it and the 15 before it
  EXPECT_EQ(sq.used(), 24);
  sq.completed(retired);
  EXPECT_EQ(sq.used(), 8);  // 8 unsignaled wait for the next signaled one
  EXPECT_TRUE(retired.empty()) << "inline messages hand nothing back";
  EXPECT_FALSE(sq.needs_flush()) << "inline messages need no completion of their own";
  // ... except at shutdown, which waits until the peer's NIC has them: nothing signaled is
  // in flight to say so (VerbsEndpoint::quiet_for_close posts an empty signaled write).
  EXPECT_TRUE(sq.unsignaled_only());
  sq.posted(true);
  EXPECT_FALSE(sq.unsignaled_only()) << "a signaled one behind them retires them";
  sq.completed(retired);
  EXPECT_EQ(sq.used(), 0);
  EXPECT_FALSE(sq.unsignaled_only()) << "nothing in flight";

  verbs::SendQueueCount small(8);
  for (int i = 0; i < 6; ++i) small.posted(small.want_signal());
  EXPECT_TRUE(small.want_signal()) << "one slot from full: the next must be signaled";
  small.posted(true);
  small.posted(small.want_signal());
  EXPECT_TRUE(small.full());
  small.completed(retired);
  EXPECT_LT(small.used(), 2) << "the first signaled completion retires the run before it";
}

// RDMA chunks: unsignaled only behind a signaled one in flight; each is handed back, in post
// order, by the completion that retires it; a tail with nothing signaled behind asks for a
// flush.
TEST(VerbsSendQueue, UnsignaledChunksAreHandedBackByTheCompletionThatRetiresThem) {
  verbs::SendQueueCount sq(256);
  std::vector<uint64_t> retired;
  EXPECT_TRUE(sq.want_signal_rdma()) << "nothing in flight: one chunk at a time stays signaled";
  sq.posted(true);
  sq.completed(retired);
  EXPECT_TRUE(retired.empty());
  EXPECT_FALSE(sq.needs_flush());

  // A stream of 40 chunks, ids 1..40.
  static_assert(verbs::SendQueueCount::kShallow == 4, "the figures below assume 4");
  std::vector<bool> sig;
  for (uint64_t id = 1; id <= 40; ++id) {
    bool s = sq.want_signal_rdma();
    sig.push_back(s);
    sq.posted(s, s ? 0 : id);
  }
  EXPECT_TRUE(sig[0] && sig[1] && sig[2] && sig[3]) << "the first four of a stream (a shallow queue) are signaled";
  EXPECT_FALSE(sig[4]);
  EXPECT_EQ(std::count(sig.begin(), sig.end(), true), 6) << "chunks 1-4, then every 16th (20 and 36)";
  EXPECT_TRUE(sig[19] && sig[35]);
  EXPECT_FALSE(sq.needs_flush()) << "signaled chunks are in flight";

  for (int i = 0; i < 4; ++i) sq.completed(retired);  // chunks 1-4: nothing before them
  EXPECT_TRUE(retired.empty());
  sq.completed(retired);  // chunk 20 retires 5..19
  ASSERT_EQ(retired.size(), 15u);
  EXPECT_EQ(retired.front(), 5u);
  EXPECT_EQ(retired.back(), 19u);
  retired.clear();
  EXPECT_FALSE(sq.needs_flush());
  sq.completed(retired);  // chunk 36 retires 21..35
  ASSERT_EQ(retired.size(), 15u);
  EXPECT_EQ(retired.front(), 21u);
  retired.clear();
  EXPECT_TRUE(sq.needs_flush()) << "37..40 wait behind nothing signaled";
  EXPECT_EQ(sq.used(), 4);
  sq.posted(true);  // the flush
  EXPECT_FALSE(sq.needs_flush());
  sq.completed(retired);
  ASSERT_EQ(retired.size(), 4u);
  EXPECT_EQ(retired.front(), 37u);
  EXPECT_EQ(retired.back(), 40u);
  EXPECT_EQ(sq.used(), 0);

  // One write at a time, each reaped a round trip later (a write ping-pong): the next one is
  // posted behind the previous, still signaled, so no flush is ever needed.
  retired.clear();
  for (uint64_t id = 1; id <= 10; ++id) {
    bool s = sq.want_signal_rdma();
    EXPECT_TRUE(s) << "write " << id << " behind one in flight";
    sq.posted(s, s ? 0 : id);
    if (id > 1) sq.completed(retired);  // the previous one's completion
    EXPECT_FALSE(sq.needs_flush());
  }
  sq.completed(retired);
  EXPECT_TRUE(retired.empty());
  EXPECT_EQ(sq.used(), 0);

  // PODNET_VERBS_SIGNAL_EVERY=1: every chunk signaled, nothing ever handed back.
  verbs::SendQueueCount every(256, 1);
  retired.clear();
  for (uint64_t id = 1; id <= 5; ++id) {
    EXPECT_TRUE(every.want_signal_rdma());
    every.posted(true);
  }
  every.completed(retired);
  EXPECT_TRUE(retired.empty());
  EXPECT_FALSE(every.needs_flush());

  // Nearly full: a chunk is signaled even behind a signaled one.
  verbs::SendQueueCount small(8);
  for (int i = 0; i < 4; ++i) small.posted(true);
  EXPECT_FALSE(small.want_signal_rdma());
  small.posted(false, 7);
  EXPECT_FALSE(small.want_signal_rdma());
  small.posted(false, 8);
  EXPECT_TRUE(small.want_signal_rdma()) << "two slots left";
}

// The table of operations in flight: ids fit a wr_id, a freed or reused slot's old id finds
// nothing (a completion after its operation failed), erase resets the entry.
TEST(VerbsSlotTable, IdsOfFreedSlotsFindNothingAndSlotsAreReused) {
  verbs::SlotTable<std::shared_ptr<int>> t;
  auto [a, va] = t.emplace();
  va = std::make_shared<int>(1);
  auto [b, vb] = t.emplace();
  vb = std::make_shared<int>(2);
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  EXPECT_LT(a, uint64_t{1} << 40) << "an id fits a wr_id's 40 bits (qp.h)";
  ASSERT_NE(t.find(a), nullptr);
  EXPECT_EQ(**t.find(a), 1);
  EXPECT_EQ(**t.find(b), 2);
  std::weak_ptr<int> held = *t.find(a);
  t.erase(a);
  EXPECT_TRUE(held.expired()) << "erase resets the entry";
  EXPECT_EQ(t.find(a), nullptr);
  EXPECT_EQ(t.size(), 1u);
  auto [c, vc] = t.emplace();  // reuses a's slot under a new generation
  vc = std::make_shared<int>(3);
  EXPECT_NE(c, a);
  EXPECT_EQ(c & verbs::SlotTable<int>::kIndexMask, a & verbs::SlotTable<int>::kIndexMask);
  EXPECT_EQ(t.find(a), nullptr) << "the old id does not reach the new entry";
  EXPECT_EQ(**t.find(c), 3);
  t.erase(a);  // stale: nothing happens
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.find(12345), nullptr);
  int seen = 0;
  const uint64_t live_b = b, live_c = c;  // structured bindings cannot be captured before clang 16
  t.for_each([&](uint64_t id, std::shared_ptr<int>& v) {
    EXPECT_TRUE(id == live_b || id == live_c);
    seen += *v;
  });
  EXPECT_EQ(seen, 5);
  t.clear();
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.find(b), nullptr);
  EXPECT_EQ(t.find(c), nullptr);
}

// On a host without RDMA the transport says so, and the context leaves verbs out of its
// address (peers then pick shm or tcp, as before).
TEST(VerbsTransport, UnavailableWithAReasonWithoutADevice) {
  if (has_rdma()) GTEST_SKIP() << "this host has an RDMA device (/sys/class/infiniband)";
  auto engine = detail::ProgressEngine::create({}).value();
  auto registry = std::make_shared<detail::MemoryRegistry>(1);
  auto t = verbs::create_verbs_transport(*engine, *registry, 1, 0, {});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Code::kUnavailable);
  EXPECT_FALSE(t.status().message().empty());
  if (!over_verbs()) {
    ContextOptions o;
    o.bind_address = "127.0.0.1";
    auto ctx = Context::create(o).value();
    EXPECT_EQ(ctx->address().find(";verbs="), std::string::npos) << ctx->address();
  }
}

// Knob values are checked before any device is opened, so the error quotes the knob on every
// host (a build without libibverbs says that instead).
TEST(VerbsTransport, RefusesASignalIntervalOutsideTheSendQueue) {
  auto engine = detail::ProgressEngine::create({}).value();
  auto registry = std::make_shared<detail::MemoryRegistry>(1);
  for (int every : {0, -1, 16385}) {
    verbs::VerbsOptions o;
    o.signal_every = every;
    auto t = verbs::create_verbs_transport(*engine, *registry, 1, 0, o);
    ASSERT_FALSE(t.ok());
    if (t.status().message().find("built without libibverbs") != std::string::npos) GTEST_SKIP() << t.status().message();
    EXPECT_EQ(t.status().code(), Code::kInvalidArgument) << t.status().message();
    EXPECT_NE(t.status().message().find(fmt::format("PODNET_VERBS_SIGNAL_EVERY={}", every)), std::string::npos)
        << t.status().message();
  }
}

// With PODNET_VERBS_CHECK=0 nothing in podnet checks a one-sided operation: the NIC at the
// target must refuse an out-of-bounds range by itself (the MR covers exactly the region). RC
// then breaks the queue pair, so the endpoint fails too, naming the peer.
TEST(VerbsNic, RefusesWhatPodnetDidNotGrant) {
  const char* check = std::getenv("PODNET_VERBS_CHECK");
  if (!over_verbs() || check == nullptr || std::string(check) != "0")
    GTEST_SKIP() << "needs PODNET_TRANSPORT=verbs PODNET_VERBS_CHECK=0 on an RDMA device (tests/rdma-lab)";
  Pair p = Pair::make();
  std::vector<std::byte> src = pattern(4096, 3), dst(4096, std::byte{0x5A});
  auto msrc = p.a->register_memory(src.data(), src.size(), Access::kNone).value();
  auto mdst = p.b->register_memory(dst.data(), 1024, Access::kRemoteWrite).value();
  RemoteKey forged = mdst.remote_key();
  forged.length = 4096;
  Status st = p.ab->write(msrc, 0, forged, 512, 1024).wait(kWait);
  EXPECT_EQ(st.code(), Code::kAccessDenied) << st.to_string();
  EXPECT_NE(st.message().find("remote access error"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
  for (auto b : dst) ASSERT_EQ(b, std::byte{0x5A});
  EXPECT_FALSE(p.ab->health().ok());
}

}  // namespace
}  // namespace podnet::testing
