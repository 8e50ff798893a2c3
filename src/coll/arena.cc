#include "coll/arena.h"

#include <fcntl.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <bit>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <optional>
#include <random>

#include "base/clock.h"
#include "base/config.h"
#include "base/futex.h"
#include "base/log.h"
#include "coll/comm_impl.h"

namespace podnet::detail {
namespace {
constexpr uint64_t kMagic = 0x706f646e65746172ull;  // "podnetar"
constexpr uint32_t kVersion = 1;
constexpr size_t kLine = 128;  // two cache lines: no false sharing through the adjacent-line prefetcher
constexpr size_t kHeaderPage = 4096;
constexpr int64_t kCheckEveryNs = 1'000'000;  // slow checks and futex sleeps: 1 ms slices
constexpr int64_t kPureSpinNs = 2'000;        // poll without yielding this long first

struct SegHeader {
  uint64_t magic;
  uint64_t nonce;
  uint32_t version;
  uint32_t nranks;
  uint64_t slot_bytes;
};

// What rank 0 offers the others when setting up.
struct Offer {
  uint32_t ok;
  int32_t pid;
  int32_t fd;
  uint32_t pad;
  uint64_t size;
  uint64_t nonce;
};

size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// Agreement bits of the set-up exchange.
constexpr uint32_t kMapped = 1, kMembarrier = 2, kCma = 4;

// Whether this process can take part in the asymmetric fence (see wake_sleepers).
uint32_t register_membarrier() {
  long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (cmds < 0 || !(cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED)) return 0;
  return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0 ? kMembarrier : 0;
}
bool at_least(uint32_t v, uint32_t want) { return static_cast<int32_t>(v - want) >= 0; }

// Every rank's agreement bits, ANDed: the others send theirs to rank 0 (step `tag`), which
// shows each to seen(rank, bits) and sends the result back (step tag + 1). `bits` holds
// this rank's on entry and everyone's on return.
template <typename Seen>
Status agree(Call& c, uint32_t& bits, uint32_t tag, Seen&& seen) {
  if (c.rank() != 0) {
    PODNET_RETURN_IF_ERROR(c.send(0, &bits, sizeof bits, tag));
    return c.recv(0, &bits, sizeof bits, tag + 1);
  }
  for (int p = 1; p < c.size(); ++p) {
    uint32_t theirs = 0;
    PODNET_RETURN_IF_ERROR(c.recv(p, &theirs, sizeof theirs, tag));
    seen(p, theirs);
    bits &= theirs;
  }
  for (int p = 1; p < c.size(); ++p) PODNET_RETURN_IF_ERROR(c.send(p, &bits, sizeof bits, tag + 1));
  return {};
}
}  // namespace

struct Arena::Header {
  std::atomic<uint32_t> seq;  // the arena call whose data this buffer holds
  uint32_t comm_seq;
  uint8_t coll, dtype, op;
  uint8_t mini_bytes;  // the payload's size in a 32-byte entry, where `bytes` is not written
  int32_t root;
  uint64_t count;
  uint64_t bytes;  // the payload's size (not in a 32-byte entry: its data is here)
};

struct alignas(kLine) Arena::Ctl {
  std::atomic<uint32_t> done;  // the last arena call this rank finished reading
  int32_t pid;                 // set up once: this rank's process and where it maps the
  uint64_t base;               // segment (its header), for cross-memory reads
  // The call this rank is in now: on a line of its own, which the others read only while
  // they wait long, so that writing it every call costs no cache miss.
  alignas(kLine) std::atomic<uint32_t> ver;  // seqlock
  std::atomic<uint64_t> now;   // comm seq | coll << 32 | dtype << 40 | op << 48 | 1 << 56
  std::atomic<uint64_t> count;
  std::atomic<int64_t> root;
};

struct alignas(kLine) Arena::Wake {
  std::atomic<uint32_t> sleepers;  // ranks asleep on a word of this rank
};

Arena::Ctl* Arena::ctl(int r) {
  static_assert(sizeof(Header) == 32 && sizeof(Ctl) == 2 * kLine && sizeof(Wake) == kLine);
  return reinterpret_cast<Ctl*>(base_ + kHeaderPage) + r;
}
Arena::Wake* Arena::wake(int r) { return reinterpret_cast<Wake*>(base_ + kHeaderPage + n_ * sizeof(Ctl)) + r; }
std::byte* Arena::lines(int r) { return base_ + lines_off_ + static_cast<size_t>(r) * kLinePages; }
Arena::Header* Arena::header(int r, uint32_t s, size_t bytes) {
  static_assert(kBuffers * kTinyEntry <= kLinePage && offsetof(Header, bytes) + kMiniBytes == kMiniEntry &&
                sizeof(Header) + kTinyBytes == kTinyEntry);  // data_off: a 32-byte entry's payload replaces `bytes`
  const uint32_t b = s % kBuffers;
  if (bytes > kTinyBytes) return buffer(r, b);
  return reinterpret_cast<Header*>(bytes <= kMiniBytes ? lines(r) + b * kMiniEntry : lines(r) + kLinePage + b * kTinyEntry);
}
Arena::Header* Arena::buffer(int r, uint32_t b) {
  size_t off = buffers_off_ + static_cast<size_t>(r) * per_rank_;
  if (large(b)) off += b / kLargeEvery * stride_;
  else off += kSlots * stride_ + (b - b / kLargeEvery - 1) * kSmallStride;
  return reinterpret_cast<Header*>(base_ + off);
}
void Arena::introduce() {
  ctl(me_)->pid = static_cast<int32_t>(getpid());
  ctl(me_)->base = reinterpret_cast<uint64_t>(base_);
}

int Arena::pid_of(int r) { return ctl(r)->pid; }
uint64_t Arena::base_of(int r) { return ctl(r)->base; }

bool Arena::probe_peers() {
  if (!config().shm_cma) return false;
  const auto* mine = reinterpret_cast<const SegHeader*>(base_);
  for (int r = 0; r < n_; ++r) {
    if (r == me_) continue;
    SegHeader theirs{};
    iovec local{&theirs, sizeof theirs}, remote{reinterpret_cast<void*>(ctl(r)->base), sizeof theirs};
    if (process_vm_readv(ctl(r)->pid, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(sizeof theirs) ||
        theirs.magic != kMagic || theirs.nonce != mine->nonce) {
      PODNET_DEBUG(kColl, "arena: no cross-memory reads from rank {} (pid {}): {}", r, ctl(r)->pid,
                   errno != 0 ? std::strerror(errno) : "unexpected data");
      return false;
    }
  }
  return true;
}

Status Arena::cross(Call& c, int r, bool to_peer, std::byte* mine, uint64_t theirs, size_t bytes) {
  while (bytes > 0) {
    iovec local{mine, bytes}, remote{reinterpret_cast<void*>(theirs), bytes};
    const pid_t pid = ctl(r)->pid;
    ssize_t done = to_peer ? process_vm_writev(pid, &local, 1, &remote, 1, 0) : process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (done <= 0)
      return c.fail(Status::Unavailable("cross-memory {} of {} bytes {} rank {} (pid {}) in the shared-memory arena: {}",
                                        to_peer ? "write" : "read", bytes, to_peer ? "to" : "from", r, pid,
                                        done < 0 ? std::strerror(errno) : "nothing moved"));
    mine += done;
    theirs += static_cast<uint64_t>(done);
    bytes -= static_cast<size_t>(done);
  }
  return {};
}

Status Arena::wait_finished(Call& c, uint32_t s) {
  for (int r = 0; r < n_; ++r) {
    if (r == me_) continue;
    PODNET_RETURN_IF_ERROR(wait_word(
        c, r, &ctl(r)->done, [s](uint32_t v) { return at_least(v, s); }, "to finish reading this rank's buffer"));
  }
  known_done_ = s;
  return {};
}

void Arena::map_headers() {
  // Every small buffer, and every slot buffer's first page (its header and a payload up to
  // nearly a page), made ready at set-up instead of in each of the first kBuffers calls.
  // Written, not only mapped, and the peers' read, not only mapped: in a VM the first access
  // to a page through a mapping can cost more than its page fault, with or without
  // MADV_POPULATE_* (a 2-vCPU VM, 8 MiB of a memfd: first copy into it 25 ms unmapped, 10.7
  // ms after MADV_POPULATE_WRITE, 0.46 ms after a memset; a second mapping's first read of
  // it 11-17 ms after MADV_POPULATE_READ, 0.4-0.6 ms after reading a byte per page; the
  // second copy 0.3-0.6 ms). About 256 KiB per rank. Every rank writes its own before the
  // set-up's last agreement, after which no rank has begun to use the arena yet, and reads
  // the others' after it (touch_peers).
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t len = std::min(stride_, data_off(page) + page);
  std::memset(lines(me_), 0, kLinePages);
  for (uint32_t b = 0; b < kBuffers; ++b)
    std::memset(static_cast<void*>(buffer(me_, b)), 0, large(b) ? len : kSmallBuffer);
  touch_want_ = len;
}

namespace {
// Reads a byte of every page of [from, to) (see touch_peers).
void read_pages(uintptr_t from, uintptr_t to, size_t page) {
  const uintptr_t start = from / page * page, end = (to + page - 1) / page * page;
  for (uintptr_t p = start; p < end; p += page) (void)*reinterpret_cast<const volatile unsigned char*>(std::max(p, from));
}
}  // namespace

void Arena::touch_peers() {
  // Called once this rank has seen every peer's post of a call begun after the peers
  // wrote their buffers this far (map_ahead before a post, map_headers before set-up
  // ends), so the pages exist and hold what their owner wrote there. A peer may meanwhile
  // write a later call's payload into one of them: the byte read is discarded (volatile,
  // only to map the page), so its value does not matter. No MADV_POPULATE_READ first: the
  // reads map the pages anyway, and in this VM a populated page still cost its first read
  // (map_headers). The small buffers once (at set-up), the slot buffers as far as payloads
  // reach.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (int r = 0; r < n_; ++r) {
    if (r == me_) continue;
    if (touched_ == 0) {
      const auto from = reinterpret_cast<uintptr_t>(lines(r));
      read_pages(from, from + kLinePages, page);
    }
    for (uint32_t b = 0; b < kBuffers; ++b) {
      const auto h = reinterpret_cast<uintptr_t>(buffer(r, b));
      if (large(b)) read_pages(h + touched_, h + touch_want_, page);
      else if (touched_ == 0) read_pages(h, h + kSmallBuffer, page);
    }
  }
  touched_ = touch_want_;
}

void Arena::map_ahead(size_t bytes) {
  // A payload larger than any before: every slot buffer will hold one within the next
  // kSlots such calls. Make them ready that far now instead of at a page fault at a time
  // inside those calls (4 ranks on 2 CPUs, 1 MiB allreduce, the first 12 calls: 527-808
  // us per call against 1095-1122): the own buffers are written here beyond the largest
  // payload so far (which no rank reads: every earlier payload ended before it), the
  // others' read once their owners have done the same (touch_peers, from saw_all). Pages
  // are still touched only as far as payloads reach. See map_headers for why written and
  // read rather than mapped: 2 ranks, allgather of 1 MiB in 512 KiB slots, the first 16
  // calls spent 750-1000 us copying into a slot only mapped ahead and 750-930 us copying
  // out of the peer's, against 20-35 us each from the 17th call on.
  const size_t before = mapped_;
  mapped_ = bytes;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (bytes < page) return;  // inside the first page, which map_headers made ready
  const size_t len = std::min(stride_, data_off(bytes) + bytes), from = std::min(len, data_off(page) + before);
  for (uint32_t b = 0; b < kBuffers; b += kLargeEvery)  // a payload beyond a small buffer lands only in these
    std::memset(reinterpret_cast<std::byte*>(buffer(me_, b)) + from, 0, len - from);
  touch_want_ = std::max(touch_want_, len);
}

std::byte* Arena::slot(int r, uint32_t s, size_t bytes) {
  assert(fits_small(bytes) || large(s % kBuffers));  // begin() was given this call's largest payload
  return reinterpret_cast<std::byte*>(header(r, s, bytes)) + data_off(bytes);
}

Arena::~Arena() {
  if (base_ != nullptr) munmap(base_, map_bytes_);
}

Result<std::unique_ptr<Arena>> Arena::establish(Call& c, size_t slot_bytes, bool local_ok, std::string* why) {
  const int n = c.size(), me = c.rank();
  if (n < 2) {
    *why = "a communicator of one rank";
    return std::unique_ptr<Arena>();
  }
  std::unique_ptr<Arena> a(new Arena);
  a->n_ = n;
  a->me_ = me;
  a->slot_bytes_ = slot_bytes;
  a->stride_ = round_up(64 + slot_bytes, kLine);
  // More ranks than the host has CPUs. Not this process's affinity: `podnet run` binds each
  // rank to one CPU (its own while there are enough, else shared with its neighbours), which
  // says nothing about how many ranks the host runs.
  a->oversubscribed_ = n > std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  a->per_rank_ = kSlots * a->stride_ + (kBuffers - kSlots) * kSmallStride;
  a->lines_off_ = round_up(kHeaderPage + n * (sizeof(Ctl) + sizeof(Wake)), kLinePage);
  a->buffers_off_ = a->lines_off_ + static_cast<size_t>(n) * kLinePages;
  a->map_bytes_ = a->buffers_off_ + static_cast<size_t>(n) * a->per_rank_;
  auto map = [&](int fd) -> bool {
    void* p = mmap(nullptr, a->map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      *why = fmt::format("mmap of {} bytes: {}", a->map_bytes_, std::strerror(errno));
      return false;
    }
    a->base_ = static_cast<std::byte*>(p);
    return true;
  };
  auto unmap = [&] {
    if (a->base_ != nullptr) munmap(a->base_, a->map_bytes_);
    a->base_ = nullptr;
  };
  uint32_t all = 0;
  if (me == 0) {
    Offer o{0, static_cast<int32_t>(getpid()), -1, 0, a->map_bytes_, std::random_device{}() * 0x9E3779B97F4A7C15ull ^ now_ns()};
    int fd = -1;
    if (local_ok) {
      fd = memfd_create("podnet-coll", MFD_CLOEXEC);
      if (fd < 0) *why = fmt::format("memfd_create: {}", std::strerror(errno));
      else if (ftruncate(fd, static_cast<off_t>(a->map_bytes_)) != 0)
        *why = fmt::format("ftruncate to {} bytes: {}", a->map_bytes_, std::strerror(errno));
      else if (map(fd)) {
        auto* h = reinterpret_cast<SegHeader*>(a->base_);
        *h = SegHeader{kMagic, o.nonce, kVersion, static_cast<uint32_t>(n), slot_bytes};
        a->introduce();
        o.ok = kMapped | register_membarrier();
        o.fd = fd;
      }
    }
    all = o.ok;
    for (int p = 1; p < n; ++p) PODNET_RETURN_IF_ERROR(c.send(p, &o, sizeof o, 0));
    PODNET_RETURN_IF_ERROR(agree(c, all, 1, [&](int p, uint32_t ok) {
      if (!(ok & kMapped) && (all & kMapped) && why->empty()) *why = fmt::format("rank {} could not map the segment", p);
    }));
    if (fd >= 0) close(fd);  // every rank has it mapped (or has given up)
  } else {
    Offer o{};
    PODNET_RETURN_IF_ERROR(c.recv(0, &o, sizeof o, 0));
    uint32_t ok = 0;
    if (!o.ok) {
      if (why->empty()) *why = "rank 0 could not make the segment (or some rank is not on this host)";
    } else if (local_ok && o.size == a->map_bytes_) {
      std::string path = fmt::format("/proc/{}/fd/{}", o.pid, o.fd);
      int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
      struct stat st {};
      if (fd < 0) *why = fmt::format("open {}: {}", path, std::strerror(errno));
      else if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != a->map_bytes_)
        *why = fmt::format("{} is not the expected {} bytes", path, a->map_bytes_);
      else if (map(fd)) {
        auto* h = reinterpret_cast<const SegHeader*>(a->base_);
        if (h->magic == kMagic && h->nonce == o.nonce && h->version == kVersion && h->nranks == static_cast<uint32_t>(n) &&
            h->slot_bytes == slot_bytes) {
          a->introduce();
          ok = kMapped | register_membarrier();
        }
        else
          *why = fmt::format("{} is not rank 0's segment", path);
      }
      if (fd >= 0) close(fd);
    } else if (local_ok) {
      *why = fmt::format("rank 0 offers {} bytes, this rank expects {} (PODNET_SHM_COLL_MAX differs)", o.size,
                         a->map_bytes_);
    }
    all = ok;
    PODNET_RETURN_IF_ERROR(agree(c, all, 1, [](int, uint32_t) {}));
    if ((ok & kMapped) && !(all & kMapped) && why->empty()) *why = "another rank could not map the segment";
  }
  if (!(all & kMapped)) {
    unmap();
    return std::unique_ptr<Arena>();
  }
  a->light_post_ = (all & kMembarrier) != 0;
  // Every rank introduced itself before its "mapped" reached rank 0, so all are there now:
  // can this rank read every other one's memory (cross-memory attach; ptrace rules)? The
  // ranks agree, so that all of them or none use the direct reads.
  uint32_t cma = a->probe_peers() ? kCma : 0;
  a->map_headers();  // before the last agreement, after which ranks use the arena
  PODNET_RETURN_IF_ERROR(agree_bits(c, cma, 3));
  a->cma_ = cma != 0;
  a->touch_peers();  // every rank's map_headers is done: it preceded its agreement
  PODNET_RETURN_IF_ERROR(a->choose_copies(c));
  return a;
}

Status Arena::agree_bits(Call& c, uint32_t& bits, uint32_t tag) {
  return agree(c, bits, tag, [](int, uint32_t) {});
}

void Arena::publish(const CallInfo& ci) {
  Ctl* m = ctl(me_);
  uint32_t v = m->ver.load(std::memory_order_relaxed);
  m->ver.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  m->now.store(ci.seq | static_cast<uint64_t>(ci.coll) << 32 | static_cast<uint64_t>(ci.dtype) << 40 |
                   static_cast<uint64_t>(ci.op) << 48 | 1ull << 56,
               std::memory_order_relaxed);
  m->count.store(ci.count, std::memory_order_relaxed);
  m->root.store(ci.root, std::memory_order_relaxed);
  m->ver.store(v + 2, std::memory_order_release);
}

void Arena::wake_sleepers(Wake* w, std::atomic<uint32_t>* word) {
  // Pairs with the sleeper's increment and re-check (Dekker): one of the two must see the
  // other's store. With membarrier the sleeper pays for both sides (an asymmetric fence:
  // it makes every running rank execute a full barrier before it re-checks), so the poster,
  // on the fast path, needs only a compiler barrier, not a fence that waits for its store
  // to reach the readers' caches.
  if (light_post_) std::atomic_signal_fence(std::memory_order_seq_cst);
  else std::atomic_thread_fence(std::memory_order_seq_cst);
  if (w->sleepers.load(std::memory_order_relaxed) > 0) futex_wake_all_shared(word);
}

void Arena::post(Call& c, uint32_t s, size_t bytes) {
  Header* h = header(me_, s, bytes);
  CallInfo ci = c.info();
  h->comm_seq = ci.seq;
  h->coll = static_cast<uint8_t>(ci.coll);
  h->dtype = static_cast<uint8_t>(ci.dtype);
  h->op = static_cast<uint8_t>(ci.op);
  h->root = ci.root;
  h->count = ci.count;
  if (bytes <= kMiniBytes) h->mini_bytes = static_cast<uint8_t>(bytes);
  else h->bytes = bytes;
  h->seq.store(s, std::memory_order_release);
  wake_sleepers(wake(me_), &h->seq);
}

void Arena::finish(uint32_t s) {
  Ctl* m = ctl(me_);
  m->done.store(s, std::memory_order_release);
  wake_sleepers(wake(me_), &m->done);
}

Status Arena::wait_writable(Call& c, uint32_t s) {
  if (seq_ <= kBuffers) return {};  // s == seq_ (the call begun last): no buffer used before
  const uint32_t need = s - kBuffers;
  if (at_least(known_done_, need)) return {};
  uint32_t low = s;
  for (int r = 0; r < n_; ++r) {
    if (r == me_) continue;
    std::atomic<uint32_t>* done = &ctl(r)->done;
    PODNET_RETURN_IF_ERROR(
        wait_word(c, r, done, [need](uint32_t v) { return at_least(v, need); }, "to finish an earlier call"));
    uint32_t v = done->load(std::memory_order_acquire);
    if (!at_least(v, low)) low = v;
  }
  known_done_ = low;
  return {};
}

Result<const std::byte*> Arena::wait_posted(Call& c, int r, uint32_t s, size_t bytes) {
  Header* h = header(r, s, bytes);
  PODNET_RETURN_IF_ERROR(wait_word(c, r, &h->seq, [s](uint32_t v) { return v == s; }, "to post its data"));
  CallInfo mine = c.info();
  CallInfo theirs{h->comm_seq, static_cast<Collective>(h->coll), static_cast<DataType>(h->dtype),
                  static_cast<ReduceOp>(h->op), h->count, h->root};
  if (!theirs.same_call(mine) || (bytes <= kMiniBytes ? h->mini_bytes : h->bytes) != bytes)
    return c.fail(Status::InvalidArgument("rank {} is in {} while this rank is in {}: every rank must call the same "
                                          "collectives with the same arguments",
                                          r, theirs.describe(), mine.describe()));
  return reinterpret_cast<const std::byte*>(h) + data_off(bytes);
}

Status Arena::slow_checks(Call& c, int r, const char* what, int64_t deadline, std::optional<CallInfo>* past) {
  CommImpl& comm = c.comm();
  if (Status a = comm.check_remote_abort(c.info()); !a.ok()) return c.fail(a);
  if (Status h = comm.peer(r).health(); !h.ok())
    return c.fail(Status(h.code(), fmt::format("waiting in the shared-memory arena for rank {} {}: {}", r, what,
                                               h.message())));
  // The call rank r is in now (seqlock read; a torn read is retried at the next check).
  Ctl* o = ctl(r);
  uint32_t v1 = o->ver.load(std::memory_order_acquire);
  uint64_t now = o->now.load(std::memory_order_relaxed);
  CallInfo theirs{static_cast<uint32_t>(now), static_cast<Collective>((now >> 32) & 0xFF),
                  static_cast<DataType>((now >> 40) & 0xFF), static_cast<ReduceOp>((now >> 48) & 0xFF),
                  o->count.load(std::memory_order_relaxed), static_cast<int32_t>(o->root.load(std::memory_order_relaxed))};
  std::atomic_thread_fence(std::memory_order_acquire);
  bool stable = (v1 & 1) == 0 && o->ver.load(std::memory_order_relaxed) == v1 && (now >> 56) == 1;
  CallInfo mine = c.info();
  if (stable && theirs.seq == mine.seq && !theirs.same_call(mine))
    return c.fail(Status::InvalidArgument("rank {} is in {} while this rank is in {}: every rank must call the same "
                                          "collectives with the same arguments",
                                          r, theirs.describe(), mine.describe()));
  if (stable && static_cast<int32_t>(theirs.seq - mine.seq) > 0) *past = theirs;
  if (now_ns() > deadline)
    return c.explain_timeout(Status::Timeout("waited {} ms for rank {} {} in the shared-memory arena: it has not "
                                             "reached this call (hung, slower, or called something else)",
                                             comm.timeout().count(), r, what));
  return {};
}

template <typename Ready>
Status Arena::wait_word(Call& c, int r, std::atomic<uint32_t>* word, Ready ready, const char* what) {
  if (ready(word->load(std::memory_order_acquire))) return {};
  const Config& cfg = config();
  const int64_t start = now_ns();
  const int64_t pure_until = start + kPureSpinNs;
  const int64_t spin_until = start + static_cast<int64_t>(cfg.spin_us) * 1000;
  const int64_t deadline = start + std::chrono::duration_cast<std::chrono::nanoseconds>(c.comm().timeout()).count();
  const uint32_t yield_mask = cfg.spin_yield_every > 1 ? std::bit_floor(static_cast<uint32_t>(cfg.spin_yield_every)) - 1 : 0;
  int64_t next_check = start + kCheckEveryNs;
  Wake* w = wake(r);
  for (uint32_t i = 1;; ++i) {
    if (oversubscribed_) {
      // The rank this one waits for may need this CPU: give it up on every poll.
      sched_yield();
      if (ready(word->load(std::memory_order_acquire))) return {};
    } else {
      cpu_relax();
      if (ready(word->load(std::memory_order_acquire))) return {};
      if ((i & 15) != 0) continue;
    }
    int64_t t = now_ns();
    if (t < pure_until && !oversubscribed_) continue;
    if (t >= next_check) {
      std::optional<CallInfo> past;
      PODNET_RETURN_IF_ERROR(slow_checks(c, r, what, deadline, &past));
      if (past) {
        // Rank r's "now" was published after everything it posted before (release/acquire):
        // it may have posted and moved on since the last poll, so one more look is conclusive.
        if (ready(word->load(std::memory_order_acquire))) return {};
        return c.fail(Status::InvalidArgument("rank {} went on to {} without taking part in this call through the "
                                              "shared-memory arena ({}): the ranks passed different arguments",
                                              r, past->describe(), c.info().describe()));
      }
      next_check = t + kCheckEveryNs;
    }
    if (cfg.busy_poll || t < spin_until) {
      if (!oversubscribed_ && ((i >> 4) & yield_mask) == 0) sched_yield();
      continue;
    }
    w->sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (light_post_) syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0);
    uint32_t v = word->load(std::memory_order_seq_cst);
    if (!ready(v)) futex_wait_shared(word, v, kCheckEveryNs);
    w->sleepers.fetch_sub(1, std::memory_order_relaxed);
  }
}

}  // namespace podnet::detail
