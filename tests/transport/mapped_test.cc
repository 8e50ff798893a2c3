// Memory podnet allocates (Context::allocate_memory): correct data over every transport, and
// over shm the mapped path (docs/shm.md "Regions both sides map"): a one-sided operation that
// is complete when the call returns, with the same refusals as the ring path.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "pair.h"
#include "transport/mapped_memory.h"
#include "transport/registry.h"
#include "transport/shm/endpoint.h"

namespace podnet::testing {
namespace {

bool over_mapped_shm(const Pair& p) {
  const char* cma = std::getenv("PODNET_SHM_CMA");
  return p.ab->transport() == "shm" && (cma == nullptr || std::string(cma) != "0");
}

// Over shm with cross-memory permission: writes until two in a row complete inside write()
// (the mapping is learned once the first reaches the target), which must happen within
// `tries`. One is not proof: a small ring write can be acknowledged by the in-process peer
// before done() is read. Elsewhere one write (a request there can also be done when write()
// returns, by chance). Every write must succeed. Returns whether the path is mapped.
bool learn_mapping(Pair& p, const MemoryRegion& src, const RemoteKey& key, size_t len, int tries = 200) {
  if (!over_mapped_shm(p)) {
    Status st = p.ab->write(src, 0, key, 0, len).wait(kWait);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return false;
  }
  int in_a_row = 0;
  for (int i = 0; i < tries; ++i) {
    Request r = p.ab->write(src, 0, key, 0, len);
    const bool done = r.done();
    Status st = r.wait(kWait);
    EXPECT_TRUE(st.ok()) << st.to_string();
    in_a_row = done ? in_a_row + 1 : 0;
    if (in_a_row == 2) return true;
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ADD_FAILURE() << "over shm with cross-memory permission the mapping was never learned";
  return false;
}

TEST(AllocatedMemory, IsZeroedAlignedAndCarriesTheMappableKeyBit) {
  Pair p = Pair::make();
  auto m = p.a->allocate_memory(10000, Access::kRemoteWrite);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->size(), 10000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m->data()) % 4096, 0u);
  EXPECT_TRUE(std::all_of(m->data(), m->data() + m->size(), [](std::byte b) { return b == std::byte{0}; }));
  EXPECT_NE(m->remote_key().key & detail::kMappableKeyBit, 0u);
  std::vector<std::byte> heap(64);
  auto r = p.a->register_memory(heap.data(), heap.size(), Access::kRemoteWrite).value();
  EXPECT_EQ(r.remote_key().key & detail::kMappableKeyBit, 0u) << "registered memory is not mappable";
  EXPECT_EQ(p.a->allocate_memory(0, Access::kNone).status().code(), Code::kInvalidArgument);
}

TEST(AllocatedMemory, WritesAndReadsLandIntactOnBothPaths) {
  Pair p = Pair::make();
  constexpr size_t kLen = 4 << 20;
  auto src = p.a->allocate_memory(kLen, Access::kNone).value();
  auto back = p.a->allocate_memory(kLen, Access::kNone).value();
  auto dst = p.b->allocate_memory(kLen, Access::kRemoteReadWrite).value();
  const RemoteKey key = dst.remote_key();
  const bool mapped = learn_mapping(p, src, key, 8);
  const size_t sizes[] = {1, 8, 4095, 100000, 1 << 20, kLen - 3};
  uint32_t seed = 1;
  for (size_t len : sizes) {
    const size_t off = (kLen - len) / 2;
    auto pat = pattern(len, seed++);
    std::memcpy(src.data() + 3, pat.data(), std::min(len, kLen - 3));
    const size_t n = std::min(len, kLen - 3);
    Request w = p.ab->write(src, 3, key, off, n);
    // Below the split threshold (PODNET_SHM_SPLIT_MIN, 64 KiB) a mapped copy is the caller's
    // alone; larger ones may be shared with the target (SharedCopiesUseBothMappings).
    const bool whole = n < (64u << 10);
    if (mapped && whole) {
      EXPECT_TRUE(w.done()) << "a mapped write is complete when write() returns (" << n << " bytes)";
    }
    ASSERT_TRUE(w.wait(kWait).ok()) << w.wait(kWait).to_string();
    ASSERT_EQ(std::memcmp(dst.data() + off, pat.data(), n), 0) << n << " bytes at " << off;
    std::memset(back.data(), 0, n);
    Request r = p.ab->read(back, 0, key, off, n);
    if (mapped && whole) {
      EXPECT_TRUE(r.done());
    }
    ASSERT_TRUE(r.wait(kWait).ok()) << r.wait(kWait).to_string();
    ASSERT_EQ(std::memcmp(back.data(), pat.data(), n), 0) << n << " bytes read back";
  }
}

// The child of SharedCopiesUseBothMappings (split knobs set by the parent): once each side
// has mapped the other's region, every write and read between two allocated regions from
// the split threshold is copied half by each side through its mapping (a read's only where
// the initiator's region grants remote writes: the target writes into it); a write from
// registered memory and a read into a region without remote rights stay the caller's whole
// copy. Prints the counts.
int shared_copies_child() {
  Pair p = Pair::make();
  if (!over_mapped_shm(p)) return 4;
  constexpr size_t kLen = 4 << 20;
  auto src = p.a->allocate_memory(kLen, Access::kNone).value();
  auto back = p.a->allocate_memory(kLen, Access::kRemoteWrite).value();
  auto dst = p.b->allocate_memory(kLen, Access::kRemoteReadWrite).value();
  const RemoteKey key = dst.remote_key();
  bool ok = learn_mapping(p, src, key, 8);
  // The target learns the initiator's regions from the first shared copies (they fall back
  // to cross-memory attach until then).
  for (int i = 0; i < 200 && ok; ++i) {
    const uint64_t before = shm::ShmEndpoint::own_key_copies();
    ok = p.ab->write(src, 0, key, 0, 1 << 20).wait(kWait).ok() && p.ab->read(back, 0, key, 0, 1 << 20).wait(kWait).ok();
    if (shm::ShmEndpoint::own_key_copies() - before == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const uint64_t pushes = shm::ShmEndpoint::split_pushes(), copies = shm::ShmEndpoint::own_key_copies();
  const uint64_t mapped_before = shm::ShmEndpoint::mapped_pushes();
  uint32_t seed = 90;
  for (size_t len : {size_t{64} << 10, size_t{(1 << 20) + 5}, kLen - 4099}) {
    const size_t off = (kLen - len) / 2 + 1;
    auto pat = pattern(len, seed++);
    std::memcpy(src.data() + 3, pat.data(), len);
    ok = ok && p.ab->write(src, 3, key, off, len).wait(kWait).ok() &&
         std::memcmp(dst.data() + off, pat.data(), len) == 0;
    std::memset(back.data(), 0, kLen);
    ok =
        ok && p.ab->read(back, 5, key, off, len).wait(kWait).ok() && std::memcmp(back.data() + 5, pat.data(), len) == 0;
  }
  const uint64_t shared = shm::ShmEndpoint::split_pushes() - pushes;
  const uint64_t mapped = shm::ShmEndpoint::mapped_pushes() - mapped_before;
  const uint64_t through = shm::ShmEndpoint::own_key_copies() - copies;
  // Sends out of allocated memory: into an allocated receive buffer the peer may write,
  // shared through both mappings (after the receiver has learned the sender's region and the
  // sender the receiver's); into a heap buffer, the receiver's pull alone.
  auto inbox = p.b->allocate_memory(kLen, Access::kRemoteWrite).value();
  std::vector<std::byte> heap_in(kLen);
  auto send_once = [&](void* into, size_t len, uint32_t pattern_seed) {
    auto pat = pattern(len, pattern_seed);
    std::memcpy(src.data() + 1, pat.data(), len);
    Request r = p.ba->recv(into, len, 9);
    return p.ab->send(src.data() + 1, len, 9).wait(kWait).ok() && r.wait(kWait).ok() &&
           std::memcmp(into, pat.data(), len) == 0;
  };
  for (int i = 0; i < 200 && ok; ++i) {
    const uint64_t before = shm::ShmEndpoint::mapped_pushes();
    ok = send_once(inbox.data(), 1 << 20, 200 + i);
    if (shm::ShmEndpoint::mapped_pushes() - before == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  uint64_t sp = shm::ShmEndpoint::split_pushes(), mp = shm::ShmEndpoint::mapped_pushes();
  for (size_t len : {size_t{64} << 10, size_t{(1 << 20) + 5}, kLen - 4099})
    ok = ok && send_once(inbox.data() + 7, len, seed++);
  const uint64_t sends_shared = shm::ShmEndpoint::split_pushes() - sp,
                 sends_mapped = shm::ShmEndpoint::mapped_pushes() - mp;
  sp = shm::ShmEndpoint::split_pushes();
  for (size_t len : {size_t{64} << 10, size_t{(1 << 20) + 5}}) ok = ok && send_once(heap_in.data(), len, seed++);
  const uint64_t heap_shared = shm::ShmEndpoint::split_pushes() - sp;
  const uint64_t pushes2 = shm::ShmEndpoint::split_pushes();
  // Registered (not allocated) memory: the target cannot map it.
  std::vector<std::byte> heap = pattern(1 << 20, 7);
  auto reg = p.a->register_memory(heap.data(), heap.size(), Access::kNone).value();
  Request w = p.ab->write(reg, 0, key, 0, heap.size());
  bool whole_done = w.done();
  ok = ok && w.wait(kWait).ok() && std::memcmp(dst.data(), heap.data(), heap.size()) == 0;
  std::memset(src.data(), 0, heap.size());
  Request r = p.ab->read(src, 0, key, 0, heap.size());  // src grants the peer nothing
  whole_done = whole_done && r.done();
  ok = ok && r.wait(kWait).ok() && std::memcmp(src.data(), heap.data(), heap.size()) == 0;
  std::fprintf(stderr,
               "shared %llu mapped %llu through %llu sends %llu/%llu heap %llu whole %d unshared %llu intact %d\n",
               static_cast<unsigned long long>(shared), static_cast<unsigned long long>(mapped),
               static_cast<unsigned long long>(through), static_cast<unsigned long long>(sends_shared),
               static_cast<unsigned long long>(sends_mapped), static_cast<unsigned long long>(heap_shared), whole_done,
               static_cast<unsigned long long>(shm::ShmEndpoint::split_pushes() - pushes2), ok);
  return ok ? 0 : 3;
}

TEST(AllocatedMemoryDeathTest, SharedCopiesUseBothMappings) {
  if (std::string why = shm_cma_skip_reason("nothing is mapped"); !why.empty()) GTEST_SKIP() << why;
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // The same threshold crowded or not, so that the machine's load does not decide.
  ::setenv("PODNET_SHM_SPLIT_MIN", "64K", 1);
  ::setenv("PODNET_SHM_SPLIT_CROWDED", "64K", 1);
  // Three writes and three reads, each shared, both halves through mappings each time; three
  // sends shared the same way, two into a heap buffer not shared; the registered write and
  // the read into a region without remote rights whole.
  EXPECT_EXIT(std::exit(shared_copies_child()), ::testing::ExitedWithCode(0),
              "shared 6 mapped 6 through 6 sends 3/3 heap 0 whole 1 unshared 0 intact 1");
  ::unsetenv("PODNET_SHM_SPLIT_MIN");
  ::unsetenv("PODNET_SHM_SPLIT_CROWDED");
}

// Rendezvous sends out of allocated memory (over shm the receiver copies them out of its
// mapping once learned; sizes past the split threshold too), and the sender's buffer reused.
TEST(AllocatedMemory, LargeSendsFromAllocatedMemoryArriveIntact) {
  Pair p = Pair::make();
  constexpr size_t kLen = 3 << 20;
  auto src = p.a->allocate_memory(kLen, Access::kNone).value();
  std::vector<std::byte> dst(kLen);
  uint32_t seed = 40;
  for (int round = 0; round < 3; ++round) {  // the first sends teach the receiver the mapping
    for (size_t len : {size_t{40000}, size_t{(1 << 20) + 5}, kLen - 4096}) {
      const size_t off = (kLen - len) / 2;
      auto pat = pattern(len, seed++);
      std::memcpy(src.data() + off, pat.data(), len);
      Request r = p.ba->recv(dst.data(), dst.size(), 7);
      ASSERT_TRUE(p.ab->send(src.data() + off, len, 7).wait(kWait).ok());
      ASSERT_TRUE(r.wait(kWait).ok());
      EXPECT_EQ(r.bytes(), len);
      ASSERT_EQ(std::memcmp(dst.data(), pat.data(), len), 0) << len << " bytes, round " << round;
    }
  }
}

// A notification after mapped writes still follows their data.
TEST(AllocatedMemory, WriteNotifyFollowsMappedWrites) {
  Pair p = Pair::make();
  constexpr size_t kLen = 1 << 20;
  auto src = p.a->allocate_memory(kLen, Access::kNone).value();
  auto dst = p.b->allocate_memory(kLen, Access::kRemoteWrite).value();
  learn_mapping(p, src, dst.remote_key(), 8);
  auto pat = pattern(kLen, 77);
  std::memcpy(src.data(), pat.data(), kLen);
  for (int round = 0; round < 20; ++round) {
    Request n = p.ba->recv_notify();
    for (size_t off = 0; off < kLen / 2; off += 64 << 10)
      ASSERT_TRUE(p.ab->write(src, off, dst.remote_key(), off, 64 << 10).wait(kWait).ok());
    Request wn = p.ab->write_notify(src, kLen / 2, dst.remote_key(), kLen / 2, kLen / 2, 1000 + round);
    ASSERT_TRUE(n.wait(kWait).ok());
    EXPECT_EQ(n.imm(), static_cast<uint64_t>(1000 + round));
    ASSERT_EQ(std::memcmp(dst.data(), pat.data(), kLen), 0) << "round " << round;
    ASSERT_TRUE(wn.wait(kWait).ok());
    std::memset(dst.data(), 0, kLen);
  }
}

TEST(AllocatedMemory, BoundsAndRightsAreRefusedOnTheMappedPath) {
  Pair p = Pair::make();
  auto src = p.a->allocate_memory(8192, Access::kNone).value();
  auto ro = p.b->allocate_memory(4096, Access::kRemoteRead).value();
  std::memset(ro.data(), 0x5a, 4096);
  // Learn the mapping with honest reads (the region refuses writes).
  bool mapped = false;
  for (int i = 0; i < 200 && !mapped; ++i) {
    Request r = p.ab->read(src, 0, ro.remote_key(), 0, 8);
    mapped = r.done() && over_mapped_shm(p);
    ASSERT_TRUE(r.wait(kWait).ok());
    if (!over_mapped_shm(p)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(mapped, over_mapped_shm(p));
  RemoteKey forged = ro.remote_key();
  forged.access = Access::kRemoteReadWrite;  // lie about the rights: only the target's word counts
  Status st = p.ab->write(src, 0, forged, 0, 16).wait(kWait);
  EXPECT_EQ(st.code(), Code::kAccessDenied) << st.to_string();
  EXPECT_NE(st.message().find("grants remote-read"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
  forged = ro.remote_key();
  forged.length = 8192;  // the target allocated 4096
  st = p.ab->read(src, 0, forged, 0, 8192).wait(kWait);
  EXPECT_EQ(st.code(), Code::kAccessDenied) << st.to_string();
  EXPECT_NE(st.message().find("outside the region"), std::string::npos) << st.message();
  forged = ro.remote_key();
  forged.addr -= 4096;  // an address before the region
  forged.length = 8192;
  st = p.ab->read(src, 0, forged, 0, 16).wait(kWait);
  EXPECT_EQ(st.code(), Code::kAccessDenied) << st.to_string();
  EXPECT_TRUE(std::all_of(ro.data(), ro.data() + 4096, [](std::byte b) { return b == std::byte{0x5a}; }));
}

// A page a writes into b's allocated page, with the mapping learned where there is one.
struct PageWriter {
  Pair p = Pair::make();
  MemoryRegion src = p.a->allocate_memory(4096, Access::kNone).value();
  MemoryRegion dst = p.b->allocate_memory(4096, Access::kRemoteWrite).value();
  const RemoteKey key = dst.remote_key();
  PageWriter() { learn_mapping(p, src, key, 64); }
};

TEST(AllocatedMemory, WriteAfterTheTargetDeregisteredFailsWithTheReason) {
  PageWriter w;
  auto& [p, src, dst, key] = w;
  dst.deregister();
  for (int i = 0; i < 2; ++i) {  // the mapped path, then the ring path once the mapping is dropped
    Status st = p.ab->write(src, 0, key, 0, 64).wait(kWait);
    if (p.ab->transport() == "verbs") {
      // The target's revocation reaches the initiator's key cache asynchronously (docs/verbs.md):
      // a write right after deregister() may reach the NIC, which refuses it and breaks the QP.
      EXPECT_TRUE(st.message().find("deregistered") != std::string::npos ||
                  st.message().find("remote access error") != std::string::npos)
          << st.to_string();
      continue;
    }
    EXPECT_EQ(st.code(), Code::kAccessDenied) << st.to_string();
    EXPECT_NE(st.message().find("deregistered"), std::string::npos) << st.message();
  }
}

// Mappings of /memfd:podnet-region in this process (both contexts of a Pair live here).
int region_mappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) n += line.find("/memfd:podnet-region") != std::string::npos;
  return n;
}

// Once the owner frees a region, the peer unmaps it too (within a tick), without touching
// the key again: a long job that allocates and frees must not pile up mapped pages.
TEST(AllocatedMemory, PeerUnmapsARegionItsOwnerFreed) {
  Pair p = Pair::make();
  if (!over_mapped_shm(p)) GTEST_SKIP() << "no mappings: not over shm with cross-memory attach";
  const int before = region_mappings();
  auto src = p.a->allocate_memory(4096, Access::kNone).value();
  {
    auto dst = p.b->allocate_memory(1 << 20, Access::kRemoteWrite).value();
    ASSERT_TRUE(learn_mapping(p, src, dst.remote_key(), 64));
    EXPECT_EQ(region_mappings(), before + 4) << "src and dst by their owners, dst's header and data by a";
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (region_mappings() > before + 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(region_mappings(), before + 1) << "only src should be left";
}

// A peer that went away is no target, even though its pages are still mapped here.
TEST(AllocatedMemory, MappedWriteToAClosedPeerFails) {
  PageWriter w;
  auto& [p, src, dst, key] = w;
  p.b.reset();  // the peer's context closes; the region stays registered in its registry
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (p.ab->health().ok() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_FALSE(p.ab->health().ok()) << "the endpoint never noticed its peer closing";
  Status st = p.ab->write(src, 0, key, 0, 64).wait(kWait);
  EXPECT_EQ(st.code(), Code::kPeerFailed) << st.to_string();
  EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
}

TEST(PeerMapping, RefusesAFileThatIsNotTheRegion) {
  auto mem = detail::MappedMemory::create(4096);
  ASSERT_TRUE(mem.ok()) << mem.status().to_string();
  (*mem)->header().key = 0x1234;
  (*mem)->header().access = static_cast<uint32_t>(Access::kRemoteWrite);
  EXPECT_FALSE(detail::PeerMapping::map((*mem)->fd(), 0x9999).ok()) << "another key";
  auto m = detail::PeerMapping::map((*mem)->fd(), 0x1234);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  (*m)->at((*m)->data_addr())[5] = std::byte{42};
  EXPECT_EQ((*mem)->data()[5], std::byte{42}) << "both mappings must show the same pages";
  EXPECT_FALSE((*m)->revoked());
  (*mem)->revoke();
  EXPECT_TRUE((*m)->revoked());
  int other = memfd_create("not-a-region", MFD_CLOEXEC);
  ASSERT_GE(other, 0);
  ASSERT_EQ(ftruncate(other, 3 * 4096), 0);
  auto bad = detail::PeerMapping::map(other, 0x1234);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("does not hold the region"), std::string::npos) << bad.status().message();
  close(other);
}

}  // namespace
}  // namespace podnet::testing
