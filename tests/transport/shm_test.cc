// The shared-memory transport's own pieces: the SPSC ring (wrap-around, pads, full ring,
// sleep/wake-up flags), a garbage hello on its socket, and that nothing is ever named in
// /dev/shm. The transfer conformance suite itself runs over shm in xfer_test.cc.
#include <gtest/gtest.h>
#include <podnet/podnet.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pair.h"
#include "transport/shm/channel.h"
#include "transport/shm/endpoint.h"
#include "transport/shm/ring.h"

namespace podnet::testing {
namespace {

using shm::RecHdr;
using shm::RingCtl;
using shm::RingReader;
using shm::RingWriter;

struct Ring {
  static constexpr size_t kCap = 4096;
  RingCtl ctl;
  alignas(64) std::byte data[kCap]{};  // a new ring is zero (a new memfd is)
  RingWriter w;
  RingReader r;
  Ring() {
    w.init(&ctl, data, kCap);
    r.init(&ctl, data, kCap);
  }
  bool push(uint64_t seq, size_t plen) {
    RecHdr* h = w.reserve(shm::record_bytes(plen));
    if (h == nullptr) return false;
    RecHdr hdr{};
    hdr.type = shm::Rec::kSend;
    hdr.seq = seq;
    hdr.plen = static_cast<uint32_t>(plen);
    std::memset(shm::inline_payload(h), static_cast<int>(seq & 0xff), plen);
    w.commit(hdr);
    w.publish();
    return true;
  }
};

// A ring with a bulk area: payloads from kBulkMin go there, smaller ones stay inline.
struct BulkRing {
  static constexpr size_t kCap = 4096, kBulk = 64 << 10;
  RingCtl ctl;
  alignas(64) std::byte data[kCap]{};
  alignas(64) std::byte bulk[kBulk]{};
  RingWriter w;
  RingReader r;
  BulkRing() {
    w.init(&ctl, data, kCap);
    w.init_bulk(bulk, kBulk);
    r.init(&ctl, data, kCap);
    r.init_bulk(bulk, kBulk);
  }
  bool push(uint64_t seq, size_t plen) {
    const bool big = plen >= shm::kBulkMin;
    std::byte* dst = nullptr;
    RecHdr* h = big ? w.reserve_bulk(plen, &dst) : w.reserve(shm::record_bytes(plen));
    if (h == nullptr) return false;
    if (!big) dst = shm::inline_payload(h);
    RecHdr hdr{};
    hdr.type = shm::Rec::kSend;
    hdr.flags = big ? shm::kBulk : 0;
    hdr.seq = seq;
    hdr.plen = static_cast<uint32_t>(plen);
    std::memset(dst, static_cast<int>(seq & 0xff), plen);
    w.commit(hdr);
    w.publish();
    return true;
  }
};

TEST(ShmRing, RecordsComeOutInOrderAcrossManyWrapArounds) {
  Ring ring;
  uint64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 2000; ++round) {
    // Odd sizes so that records straddle the end and pads are needed.
    while (ring.push(next_in, (next_in * 37) % 700)) ++next_in;
    for (int k = 0; k < 3; ++k) {
      const RecHdr* h = ring.r.peek();
      ASSERT_NE(h, nullptr);
      ASSERT_EQ(h->seq, next_out);
      ASSERT_EQ(h->plen, (next_out * 37) % 700);
      for (size_t i = 0; i < h->plen; ++i)
        ASSERT_EQ(static_cast<uint8_t>(shm::payload(h)[i]), next_out & 0xff) << "record " << next_out;
      ring.r.consume(h);
      ++next_out;
    }
    ring.r.release();
  }
  EXPECT_GT(next_in, 4000u);
}

TEST(ShmRing, FullRingRefusesUntilTheConsumerReleases) {
  Ring ring;
  int n = 0;
  const size_t plen = 1024 - sizeof(RecHdr);  // a record of exactly 1024 bytes
  while (ring.push(n, plen)) ++n;
  EXPECT_EQ(n, 3) << "4096 bytes hold three: the line after the newest record stays free (ring.h)";
  EXPECT_TRUE(ring.push(n, 960 - sizeof(RecHdr))) << "960 bytes and the free line fill the rest";
  EXPECT_FALSE(ring.push(99, 8));
  const RecHdr* h = ring.r.peek();
  ASSERT_NE(h, nullptr);
  ring.r.consume(h);
  EXPECT_FALSE(ring.push(99, 8)) << "space must not be reused before release()";
  ring.r.release();
  EXPECT_TRUE(ring.push(99, 8));
}

// Large and small payloads interleaved: the large ones in the bulk area (which wraps too,
// with payloads that do not fit before its end starting over at 0), all in order.
TEST(ShmRing, BulkPayloadsComeOutInOrderAcrossManyWrapArounds) {
  BulkRing ring;
  auto size_of = [](uint64_t seq) -> size_t { return seq % 3 == 0 ? 4096 + (seq * 977) % 12000 : (seq * 37) % 700; };
  uint64_t next_in = 0, next_out = 0, bulk_records = 0;
  for (int round = 0; round < 3000; ++round) {
    while (ring.push(next_in, size_of(next_in))) ++next_in;
    for (int k = 0; k < 2 && next_out < next_in; ++k) {
      const RecHdr* h = ring.r.peek();
      ASSERT_NE(h, nullptr);
      ASSERT_EQ(h->seq, next_out);
      ASSERT_EQ(h->plen, size_of(next_out));
      const std::byte* p = shm::payload(h);
      if (h->plen >= shm::kBulkMin) {
        ++bulk_records;
        ASSERT_TRUE(h->flags & shm::kBulk);
        ASSERT_GE(p, ring.bulk);
        ASSERT_LE(p + h->plen, ring.bulk + BulkRing::kBulk) << "a bulk payload must never wrap";
      } else {
        ASSERT_EQ(p, reinterpret_cast<const std::byte*>(h) + sizeof(RecHdr));
      }
      for (size_t i = 0; i < h->plen; ++i)
        ASSERT_EQ(static_cast<uint8_t>(p[i]), next_out & 0xff) << "record " << next_out;
      ring.r.consume(h);
      ++next_out;
    }
    ring.r.release();
  }
  EXPECT_GT(bulk_records, 1500u) << "the bulk area must have wrapped many times";
}

TEST(ShmRing, FullBulkAreaRefusesUntilTheConsumerReleases) {
  BulkRing ring;
  int n = 0;
  while (ring.push(n, 16 << 10)) ++n;
  EXPECT_EQ(n, 4) << "64 KiB of bulk hold four 16 KiB payloads";
  EXPECT_TRUE(ring.push(n, 100)) << "a small record still fits the ring";
  const RecHdr* h = ring.r.peek();
  ASSERT_NE(h, nullptr);
  ring.r.consume(h);
  EXPECT_FALSE(ring.push(99, 16 << 10)) << "bulk space must not be reused before release()";
  EXPECT_TRUE(ring.w.arm_for_space(shm::kCacheLine, 16 << 10)) << "no bulk space: the producer may sleep";
  EXPECT_TRUE(ring.r.release()) << "the producer asked to be woken";
  EXPECT_TRUE(ring.push(99, 16 << 10));
}

// The payload's place is the consumer's own computation: a peer that writes something else
// into the record's spare bytes does not move where the payload is read.
TEST(ShmRing, BulkPayloadPlaceIsComputedByTheConsumer) {
  BulkRing ring;
  ASSERT_TRUE(ring.push(1, 8192));
  auto* line = reinterpret_cast<std::byte*>(ring.data);
  const int64_t forged = -4096;
  std::memcpy(line + sizeof(RecHdr), &forged, sizeof forged);
  const RecHdr* h = ring.r.peek();
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(shm::payload(h), ring.bulk);
}

// PODNET_SHM_RING and PODNET_SHM_BULK: powers of two; an area must hold two of the largest
// payloads (64 KiB fragments) and may be absent.
TEST(ShmRing, RingAndBulkSizesAreChecked) {
  using shm::Channel;
  EXPECT_TRUE(Channel::valid_sizes(1 << 20, 4 << 20));
  EXPECT_TRUE(Channel::valid_sizes(1 << 20, 0));
  EXPECT_TRUE(Channel::valid_sizes(64 << 10, 256 << 10));
  EXPECT_FALSE(Channel::valid_sizes(1 << 20, 3 << 20)) << "not a power of two";
  EXPECT_FALSE(Channel::valid_sizes(1 << 20, 128 << 10)) << "below the smallest area";
  EXPECT_FALSE(Channel::valid_sizes(32 << 10, 0)) << "below the smallest ring";
  EXPECT_FALSE(Channel::valid_sizes(0, 4 << 20));
  EXPECT_FALSE(Channel::valid_sizes(1 << 20, size_t{2} << 30)) << "above 1 GiB";
}

TEST(ShmRing, SleepingConsumerIsWokenByThePublish) {
  Ring ring;
  EXPECT_TRUE(ring.r.arm()) << "empty ring: the consumer may sleep";
  ASSERT_NE(ring.w.reserve(shm::record_bytes(0)), nullptr);
  RecHdr hdr{};
  hdr.type = shm::Rec::kSend;
  ring.w.commit(hdr);
  EXPECT_TRUE(ring.w.publish()) << "the producer must ring the doorbell";
  EXPECT_FALSE(ring.r.arm()) << "a record is there: the consumer must not sleep";
  ring.r.disarm();
  ASSERT_TRUE(ring.push(1, 8));  // nobody asked for a wake-up now
  EXPECT_EQ(ring.ctl.consumer_sleeping.load(), 0u);
}

std::set<std::string> dev_shm() {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) names.insert(e.path().string());
  return names;
}

// A 1 MiB one-sided write from a to b (pattern `seed`) lands intact.
bool write_arrives_intact(Pair& p, uint32_t seed) {
  std::vector<std::byte> a = pattern(1 << 20, seed), b(1 << 20);
  auto ma = p.a->register_memory(a.data(), a.size(), Access::kNone).value();
  auto mb = p.b->register_memory(b.data(), b.size(), Access::kRemoteWrite).value();
  return p.ab->write(ma, 0, mb.remote_key(), 0, a.size()).wait(kWait).ok() && a == b;
}

TEST(ShmTransport, NothingIsNamedInDevShm) {
  if (!std::filesystem::exists("/dev/shm")) GTEST_SKIP() << "no /dev/shm on this host";
  auto before = dev_shm();
  {
    Pair p = Pair::make();
    if (p.ab->transport() != "shm") GTEST_SKIP() << "this run is not over shm (PODNET_TRANSPORT)";
    ASSERT_TRUE(write_arrives_intact(p, 3));
    EXPECT_EQ(dev_shm(), before) << "the segments must be memfds, never files in /dev/shm";
  }
  EXPECT_EQ(dev_shm(), before);
}

// Size and Rss (kB) of each of this process's mappings of a channel segment.
std::vector<std::pair<long, long>> segment_mappings() {
  std::ifstream smaps("/proc/self/smaps");
  std::vector<std::pair<long, long>> out;
  bool in_segment = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long lo = 0, hi = 0;
    long kb = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {  // a mapping's first line
      in_segment = line.find("/memfd:podnet-shm") != std::string::npos;
      if (in_segment) out.emplace_back(0, 0);
    } else if (in_segment && std::sscanf(line.c_str(), "Size: %ld kB", &kb) == 1) {
      out.back().first = kb;
    } else if (in_segment && std::sscanf(line.c_str(), "Rss: %ld kB", &kb) == 1) {
      out.back().second = kb;
    }
  }
  return out;
}

// A channel's segment is committed and mapped when the channel opens (PODNET_SHM_COMMIT):
// no page of it is first touched on the data path.
TEST(ShmTransport, ChannelSegmentsAreResidentOnceOpen) {
  Pair p = Pair::make();
  if (p.ab->transport() != "shm") GTEST_SKIP() << "this run is not over shm (PODNET_TRANSPORT)";
  // The accepting side maps (and commits) in its own thread, perhaps still now.
  auto resident = [](const std::vector<std::pair<long, long>>& maps) {
    return std::all_of(maps.begin(), maps.end(), [](const auto& m) { return m.second == m.first; });
  };
  auto maps = segment_mappings();
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
       !(maps.size() >= 4 && resident(maps)) && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    maps = segment_mappings();
  }
  ASSERT_GE(maps.size(), 4u) << "each context maps the segment it made and its peer's";
  for (auto [size, rss] : maps) EXPECT_EQ(rss, size) << "kB resident of a " << size << " kB segment mapping";
  EXPECT_GE(shm::Channel::committed_bytes(), 2 * size_t(maps.front().first) * 1024);
}

// The child of SegmentsPastTheCommitBudgetFaultIn: 0 when the segments stayed mostly
// unresident until used and a 1 MiB write arrived intact.
int fault_in_child() {
  Pair p = Pair::make();
  auto maps = segment_mappings();
  bool lazy = !maps.empty();
  for (const auto& m : maps) lazy = lazy && m.second < m.first / 4;  // Rss, Size
  const bool same = write_arrives_intact(p, 5);
  std::fprintf(stderr, "lazy %d same %d committed %zu\n", lazy, same, shm::Channel::committed_bytes());
  return lazy && same && shm::Channel::committed_bytes() == 0 ? 0 : 3;
}

// Past the budget (here 0) pages come in as traffic reaches them; the data is the same. The
// knob is read once per process: a fresh child.
TEST(ShmTransportDeathTest, SegmentsPastTheCommitBudgetFaultIn) {
  const char* t = std::getenv("PODNET_TRANSPORT");
  if (t != nullptr && std::string(t) != "auto" && std::string(t) != "shm") GTEST_SKIP() << "this run is not over shm";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ::setenv("PODNET_SHM_COMMIT", "0", 1);
  EXPECT_EXIT(std::exit(fault_in_child()), ::testing::ExitedWithCode(0), "lazy 1 same 1 committed 0");
  ::unsetenv("PODNET_SHM_COMMIT");
}

// The child of SplitCopiesStartAtTheirKnob: sends of each size in `sizes` while this thread
// never waits on the send before the receive is complete (the sending context's engine
// thread copies its half). Prints how many of them split, and whether every receive
// completed with the bytes sent and every send completed after it.
int split_child(const std::vector<size_t>& sizes) {
  Pair p = Pair::make();
  if (p.ab->transport() != "shm") return 4;
  const uint64_t before = shm::ShmEndpoint::split_pushes();
  bool ok = true;
  for (size_t bytes : sizes) {
    std::vector<std::byte> src = pattern(bytes, 11), dst(bytes);
    Request r = p.ba->recv(dst.data(), bytes, 3);
    Request s = p.ab->send(src.data(), bytes, 3);
    ok = ok && r.wait(kWait).ok() && dst == src;
    ok = ok && s.wait(kWait).ok();
  }
  std::fprintf(stderr, "split %llu intact %d\n",
               static_cast<unsigned long long>(shm::ShmEndpoint::split_pushes() - before), ok);
  return ok ? 0 : 3;
}

// From PODNET_SHM_SPLIT_MIN a send past the eager size is copied by both sides, on a crowded
// host only from PODNET_SHM_SPLIT_CROWDED too (set to the same size here, so that the
// machine's load does not decide). The knobs are read once per process: fresh children.
TEST(ShmTransportDeathTest, SplitCopiesStartAtTheirKnob) {
  if (std::string why = shm_cma_skip_reason("nothing splits"); !why.empty()) GTEST_SKIP() << why;
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ::setenv("PODNET_SHM_SPLIT_MIN", "64K", 1);
  ::setenv("PODNET_SHM_SPLIT_CROWDED", "64K", 1);
  // 40 KiB: past the eager size, one cross-memory copy; 64 and 128 KiB: split.
  EXPECT_EXIT(std::exit(split_child({40 << 10, 64 << 10, 128 << 10})), ::testing::ExitedWithCode(0),
              "split 2 intact 1");
  ::setenv("PODNET_SHM_SPLIT_MIN", "1M", 1);
  ::setenv("PODNET_SHM_SPLIT_CROWDED", "1M", 1);
  EXPECT_EXIT(std::exit(split_child({128 << 10, 1 << 20, 4 << 20})), ::testing::ExitedWithCode(0),
              "split 2 intact 1");
  ::setenv("PODNET_SHM_SPLIT_MIN", "0", 1);
  EXPECT_EXIT(std::exit(split_child({4 << 20})), ::testing::ExitedWithCode(0), "split 0 intact 1");
  ::unsetenv("PODNET_SHM_SPLIT_MIN");
  ::unsetenv("PODNET_SHM_SPLIT_CROWDED");
}

// Lines through a pipe, for two processes to swap their addresses.
bool put_line(int fd, const std::string& line) {
  std::string l = line + "\n";
  return ::write(fd, l.data(), l.size()) == static_cast<ssize_t>(l.size());
}

std::string get_line(int fd) {
  std::string line;
  char c = 0;
  while (::read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
  return line;
}

// One side of a two-process test: its context, and its endpoint to the other process, which
// this side reached through the pipes (`in` brings the other's address, `out` takes ours) and
// checked with an 8-byte message (rank 0 sends it, rank 1 receives it). nullopt on failure.
struct ShmPeer {
  std::unique_ptr<Context> ctx;
  std::shared_ptr<Endpoint> ep;
};

std::optional<ShmPeer> meet(int rank, int in, int out) {
  ContextOptions o;
  o.bind_address = "127.0.0.1";
  o.rank = rank;
  auto ctx = Context::create(o);
  if (!ctx.ok()) return std::nullopt;
  put_line(out, (*ctx)->address());
  auto ep = (*ctx)->connect(get_line(in));
  if (!ep.ok() || (*ep)->transport() != "shm") return std::nullopt;
  uint64_t ping = 1;
  Request r = rank == 0 ? (*ep)->send(&ping, sizeof ping, 1) : (*ep)->recv(&ping, sizeof ping, 1);
  if (!r.wait(kWait).ok()) return std::nullopt;
  return ShmPeer{std::move(*ctx), std::move(*ep)};
}

// A receiving process's wait: up to 10 s, its outcome on stderr for the death test to match.
Status await_receive(Request& r) {
  Status st = r.wait(std::chrono::seconds(10));
  std::fprintf(stderr, "receive: %s\n", st.to_string().c_str());
  return st;
}

constexpr size_t kHalfMessage = 14000;  // 4 fragments of a 64 KiB ring: 4040 * 3 + 1880

// The receiving process of AReceiveAMessageWasFillingFailsWhenThePeerGoes: posts the receive,
// says so, and reports how it ended (0: failed with the peer's error, as it should; 2: still
// waiting 10 s later; 3: succeeded, which it cannot with a message half sent).
int half_message_receiver(int in, int out) {
  std::optional<ShmPeer> p = meet(1, in, out);
  if (!p) return 5;
  std::vector<std::byte> buf(kHalfMessage);
  Request r = p->ep->recv(buf.data(), buf.size(), 7);
  put_line(out, "ready");
  Status st = await_receive(r);
  if (st.code() == Code::kTimeout) return 2;
  return st.ok() ? 3 : 0;
}

// The sending process: fills the stopped receiver's ring but for three fragments of the
// message, sends the message (the rest stays queued here), and exits without closing its
// context, as a crashing process would. Returns what went wrong here, or 0.
int half_message_sender(pid_t rx, int to_rx, int from_rx) {
  std::optional<ShmPeer> p = meet(0, from_rx, to_rx);
  if (!p) return 22;
  std::shared_ptr<Endpoint>& ep = p->ep;
  if (get_line(from_rx) != "ready") return 25;
  ::kill(rx, SIGSTOP);  // it consumes nothing more until SIGCONT
  for (int i = 0; i < 200; ++i) {  // stopped: its state in /proc reads 'T'
    std::ifstream stat("/proc/" + std::to_string(rx) + "/stat");
    std::string line;
    std::getline(stat, line);
    const size_t paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'T') break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::vector<std::byte> filler(4000), msg = pattern(kHalfMessage, 7);
  for (uint64_t i = 0; i < 13; ++i)  // 13 records of 4056 bytes: 12808 of 65536 left
    if (!ep->send(filler.data(), filler.size(), 100 + i).wait(std::chrono::seconds(2)).ok()) return 27;
  Request m = ep->send(msg.data(), msg.size(), 7);
  if (m.wait(std::chrono::milliseconds(200)).code() != Code::kTimeout) return 28;  // whole: proves nothing
  ::_exit(0);  // before the context's destructor: the message's last fragment never goes
}

// Runs the receiver and the sender in processes of their own; once the sender is gone, lets
// the receiver go on. The receiver's code, or the sender's when it failed.
int half_message_test() {
  int to_rx[2], from_rx[2];
  if (::pipe(to_rx) != 0 || ::pipe(from_rx) != 0) return 20;
  std::fflush(nullptr);
  pid_t rx = ::fork();
  if (rx < 0) return 21;
  if (rx == 0) ::_exit(half_message_receiver(to_rx[0], from_rx[1]));
  pid_t tx = ::fork();
  if (tx < 0) return 21;
  if (tx == 0) ::_exit(half_message_sender(rx, to_rx[1], from_rx[0]));
  int status = 0;
  if (::waitpid(tx, &status, 0) != tx || !WIFEXITED(status)) return 30;
  const int sent = WEXITSTATUS(status);
  ::kill(rx, SIGCONT);
  if (::waitpid(rx, &status, 0) != rx || !WIFEXITED(status)) return 29;
  return sent != 0 ? sent : WEXITSTATUS(status);
}

// A message larger than one record arrives fragment by fragment into a posted receive, which
// only the thread consuming the ring holds meanwhile: when the sender dies with the message
// half sent, that receive must fail with the peer's error, not wait forever.
TEST(ShmTransportDeathTest, AReceiveAMessageWasFillingFailsWhenThePeerGoes) {
  const char* t = std::getenv("PODNET_TRANSPORT");
  if (t != nullptr && std::string(t) != "auto" && std::string(t) != "shm") GTEST_SKIP() << "this run is not over shm";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Without cross-memory attach a 14000-byte send goes through the ring in fragments.
  ::setenv("PODNET_SHM_CMA", "0", 1);
  ::setenv("PODNET_SHM_RING", "64K", 1);
  ::setenv("PODNET_SHM_BULK", "0", 1);
  EXPECT_EXIT(std::exit(half_message_test()), ::testing::ExitedWithCode(0), "receive: peer-failed: recv from rank 0");
  ::unsetenv("PODNET_SHM_CMA");
  ::unsetenv("PODNET_SHM_RING");
  ::unsetenv("PODNET_SHM_BULK");
}

constexpr size_t kPulled = 1 << 20;  // past the eager size: the receiver pulls it from the sender

// The receiving process of AClosingContextWaitsForItsPeerToHandleWhatItPosted: 0 when the
// receive got the bytes the sender had when it sent, or failed and nothing wrote into its
// buffer afterwards; 3 when it got other bytes (written after the send was handed back
// failed); 2 when it still waited 10 s later; 4 when its buffer changed after it failed.
int pull_receiver(int in, int out) {
  std::optional<ShmPeer> p = meet(1, in, out);
  if (!p) return 5;
  std::vector<std::byte> buf(kPulled);
  Request r = p->ep->recv(buf.data(), buf.size(), 7);
  put_line(out, "ready");
  Status st = await_receive(r);
  if (st.code() == Code::kTimeout) return 2;
  if (st.ok()) return buf == pattern(kPulled, 7) ? 0 : 3;
  // Failed: the buffer is this side's again; nothing may write into it any more.
  std::fill(buf.begin(), buf.end(), std::byte{0x5a});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  return std::all_of(buf.begin(), buf.end(), [](std::byte b) { return b == std::byte{0x5a}; }) ? 0 : 4;
}

// The sending process: posts a send the stopped receiver is to pull, closes its context (the
// receiver goes on 300 ms later), then writes new bytes into the send's buffer.
int pull_sender() {
  ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY);  // the receiver reads this process (Yama scope 1)
  int to_rx[2], from_rx[2];
  if (::pipe(to_rx) != 0 || ::pipe(from_rx) != 0) return 20;
  std::fflush(nullptr);
  pid_t rx = ::fork();
  if (rx < 0) return 21;
  if (rx == 0) ::_exit(pull_receiver(to_rx[0], from_rx[1]));
  std::optional<ShmPeer> p = meet(0, from_rx[0], to_rx[1]);
  if (!p) return 22;
  if (get_line(from_rx[0]) != "ready") return 25;
  ::kill(rx, SIGSTOP);
  int status = 0;
  if (::waitpid(rx, &status, WUNTRACED) != rx || !WIFSTOPPED(status)) return 26;
  std::vector<std::byte> src = pattern(kPulled, 7);
  Request s = p->ep->send(src.data(), src.size(), 7);
  std::thread wake([rx] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(rx, SIGCONT);
  });
  p->ep.reset();
  p->ctx.reset();  // a request outlives its context, but only done() and status() may be asked
  std::fprintf(stderr, "send: %s\n", s.done() ? s.status().to_string().c_str() : "still pending");
  std::fill(src.begin(), src.end(), std::byte{0xee});  // the context is gone: the memory is the user's
  wake.join();
  if (::waitpid(rx, &status, 0) != rx || !WIFEXITED(status)) return 29;
  return WEXITSTATUS(status);
}

// A send past the eager size leaves its bytes where they are: the receiver pulls them with
// cross-memory attach. A context that closes while such a send waits must not hand the send
// back before its peer, still running, is done with it, or the peer copies what the user
// writes there next and delivers it as the message. Split (the default from 64 KiB), the
// sender would push its half into the receive buffer: once it said goodbye it must not, since
// the peer fails that receive right after it handled the goodbye.
TEST(ShmTransportDeathTest, AClosingContextWaitsForItsPeerToHandleWhatItPosted) {
  if (std::string why = shm_cma_skip_reason("sends are copied through the ring"); !why.empty()) GTEST_SKIP() << why;
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ::setenv("PODNET_SHM_SPLIT_MIN", "0", 1);  // the receiver pulls all of it
  EXPECT_EXIT(std::exit(pull_sender()), ::testing::ExitedWithCode(0), "send: ok");
  ::setenv("PODNET_SHM_SPLIT_MIN", "64K", 1);
  ::setenv("PODNET_SHM_SPLIT_CROWDED", "64K", 1);
  EXPECT_EXIT(std::exit(pull_sender()), ::testing::ExitedWithCode(0),
              "send: cancelled: .*the local context is closing: no more copies");
  ::unsetenv("PODNET_SHM_SPLIT_MIN");
  ::unsetenv("PODNET_SHM_SPLIT_CROWDED");
}

// Peers in this same process (here two contexts; in a job, each rank's endpoint to itself)
// are polled only when this process published something on such a channel, and every few
// turns regardless (ShmTransport::poll): every publish on their channels must count.
TEST(ShmTransport, PublishesWithinOneProcessAreCounted) {
  Pair p = Pair::make();
  if (p.ab->transport() != "shm") GTEST_SKIP() << "this run is not over shm (PODNET_TRANSPORT)";
  const uint64_t before = shm::Channel::local_publishes();
  for (uint64_t i = 0; i < 100; ++i) {
    uint64_t out = i, in = ~i;
    Request r = p.ba->recv(&in, sizeof in, i);
    ASSERT_TRUE(p.ab->send(&out, sizeof out, i).wait(kWait).ok());
    ASSERT_TRUE(r.wait(kWait).ok());
    EXPECT_EQ(in, i);
  }
  EXPECT_GE(shm::Channel::local_publishes() - before, 100u);
}

// Many threads of one process send to a peer context of the same process while its own
// thread receives: each message arrives whole and in time, whichever thread's poll finds it
// (a record left behind by a poll that lost the ring to another thread is found by the
// periodic poll, not only by the next publish).
TEST(ShmTransport, MessagesWithinOneProcessArriveFromManyThreads) {
  Pair p = Pair::make();
  if (p.ab->transport() != "shm") GTEST_SKIP() << "this run is not over shm (PODNET_TRANSPORT)";
  constexpr int kThreads = 4, kEach = 2000;
  std::vector<std::thread> senders;
  senders.reserve(kThreads);
  std::vector<Status> failures(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    senders.emplace_back([&, t] {
      for (int i = 0; i < kEach && failures[t].ok(); ++i) {
        uint64_t v = static_cast<uint64_t>(t) << 32 | static_cast<uint64_t>(i);
        failures[t] = p.ab->send(&v, sizeof v, static_cast<uint64_t>(t) << 32 | static_cast<uint64_t>(i)).wait(kWait);
      }
    });
  }
  int wrong = 0;
  Status bad;
  for (int i = 0; i < kEach && bad.ok(); ++i) {
    for (int t = 0; t < kThreads && bad.ok(); ++t) {
      const uint64_t tag = static_cast<uint64_t>(t) << 32 | static_cast<uint64_t>(i);
      uint64_t v = 0;
      bad = p.ba->recv(&v, sizeof v, tag).wait(kWait);
      if (bad.ok() && v != tag) ++wrong;
    }
  }
  for (auto& th : senders) th.join();
  EXPECT_TRUE(bad.ok()) << bad.to_string();
  for (const Status& f : failures) EXPECT_TRUE(f.ok()) << f.to_string();
  EXPECT_EQ(wrong, 0);
}

// Connects to a context's shm socket (its name is the third field of the address's shm=
// part) and sends junk: the context refuses it and keeps working.
TEST(ShmTransport, GarbageOnTheSocketIsRefusedWithoutHarm) {
  Pair p = Pair::make();
  if (p.ab->transport() != "shm") GTEST_SKIP() << "this run is not over shm (PODNET_TRANSPORT)";
  std::string addr = p.b->address();
  size_t at = addr.find(";shm=");
  ASSERT_NE(at, std::string::npos) << addr;
  std::string shm = addr.substr(at + 5, addr.find(';', at + 5) - at - 5);
  std::string name = shm.substr(shm.rfind(',') + 1);
  for (int attempt = 0; attempt < 3; ++attempt) {
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path + 1, name.data(), name.size());
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), len), 0) << std::strerror(errno);
    const char junk[] = "GET / HTTP/1.0\r\n\r\n";
    if (attempt < 2) {
      ASSERT_GT(send(fd, junk, attempt == 0 ? sizeof junk : 3, 0), 0);
    }
    close(fd);
  }
  uint64_t v = 7, w = 0;
  Request r = p.ba->recv(&w, 8, 5);
  ASSERT_TRUE(p.ab->send(&v, 8, 5).wait(kWait).ok());
  ASSERT_TRUE(r.wait(kWait).ok());
  EXPECT_EQ(w, 7u);
}

// Large operations take the single-copy and split paths (the initiator copies half itself once
// the target said go): a forged key must still be refused before any byte moves.
TEST(ShmTransport, LargeForgedOperationsAreRefusedBeforeAnyCopy) {
  Pair p = Pair::make();
  constexpr size_t kBig = 4 << 20;
  std::vector<std::byte> src = pattern(kBig, 9), dst(kBig, std::byte{0x5a}), back(kBig, std::byte{0});
  auto msrc = p.a->register_memory(src.data(), src.size(), Access::kNone).value();
  auto mback = p.a->register_memory(back.data(), back.size(), Access::kNone).value();
  auto mdst = p.b->register_memory(dst.data(), kBig / 2, Access::kRemoteWrite).value();
  const std::vector<std::byte> before = dst;
  RemoteKey forged = mdst.remote_key();
  forged.length = kBig;  // the target registered only half
  forged.access = Access::kRemoteReadWrite;
  Status st = p.ab->write(msrc, 0, forged, 0, kBig).wait(kWait);
  EXPECT_EQ(st.code(), Code::kAccessDenied) << st.to_string();
  EXPECT_NE(st.message().find("outside the region"), std::string::npos) << st.message();
  st = p.ab->read(mback, 0, forged, 0, kBig / 2).wait(kWait);
  EXPECT_EQ(st.code(), Code::kAccessDenied) << st.to_string();
  EXPECT_NE(st.message().find("grants remote-write"), std::string::npos) << st.message();
  EXPECT_TRUE(dst == before) << "the target's memory changed";
  EXPECT_TRUE(std::all_of(back.begin(), back.end(), [](std::byte b) { return b == std::byte{0}; }));
  // The honest large write and read still work afterwards.
  ASSERT_TRUE(p.ab->write(msrc, 0, mdst.remote_key(), 0, kBig / 2).wait(kWait).ok());
  EXPECT_TRUE(std::equal(dst.begin(), dst.begin() + kBig / 2, src.begin()));
}

}  // namespace
}  // namespace podnet::testing
