#include "transport/shm/channel.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "transport/shm/ptracer.h"

namespace podnet::shm {

thread_local const Channel::Consuming* Channel::t_consuming = nullptr;

namespace {
constexpr size_t kPage = 4096;
constexpr size_t kCtlOffset = kPage;            // RingCtl of the request ring, then the reply ring
constexpr size_t kDataOffset = 2 * kPage;       // request ring, reply ring, request bulk, reply bulk
constexpr int kMaxRecordsPerDrain = 256;

size_t segment_bytes(size_t ring, size_t bulk) { return kDataOffset + 2 * ring + 2 * bulk; }

// Segment bytes committed at channel opening and still mapped, by this process (both roles).
std::atomic<size_t> g_committed{0};

// Counts `bytes` as committed when that keeps the total within `max`.
bool reserve_commit(size_t bytes, size_t max) {
  size_t now = g_committed.load(std::memory_order_relaxed);
  while (now + bytes <= max)
    if (g_committed.compare_exchange_weak(now, now + bytes, std::memory_order_relaxed)) return true;
  return false;
}
}  // namespace

Status send_hello(int sock, const Hello& h, const int* fds, int nfds) {
  iovec iov{const_cast<Hello*>(&h), sizeof h};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char ctrl[CMSG_SPACE(2 * sizeof(int))] = {};
  if (nfds > 0) {
    msg.msg_control = ctrl;
    msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
  }
  ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n != static_cast<ssize_t>(sizeof h)) {
    // The peer went away between its hello and our reply: that is the peer failing.
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
      return Status::PeerFailed("the peer closed its shared-memory socket (sendmsg: {})", std::strerror(errno));
    return Status::Unavailable("shm: sendmsg: {}", std::strerror(errno));
  }
  return {};
}

Result<Hello> recv_hello(int sock, int fds[2]) {
  fds[0] = fds[1] = -1;
  Hello h;
  iovec iov{&h, sizeof h};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char ctrl[CMSG_SPACE(2 * sizeof(int))] = {};
  msg.msg_control = ctrl;
  msg.msg_controllen = sizeof ctrl;
  ssize_t n = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::Timeout("no message yet");
  if (n < 0) return Status::Unavailable("shm: recvmsg: {}", std::strerror(errno));
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (i < 2) fds[i] = fd;
      else close(fd);
    }
  }
  if (n == 0) return Status::Unavailable("the peer closed its shared-memory socket");
  if (n != static_cast<ssize_t>(sizeof h) || h.magic != SegmentHeader::kMagic)
    return Status::Protocol("shm: not a podnet hello ({} bytes)", n);
  if (h.version != SegmentHeader::kVersion)
    return Status::Protocol("shm: peer speaks version {}, this podnet version {}", h.version, SegmentHeader::kVersion);
  return h;
}

Status cross_copy(pid_t pid, std::byte* local, uint64_t remote, size_t len, bool into_peer) {
  size_t done = 0;
  while (done < len) {
    iovec l{local + done, len - done};
    iovec r{reinterpret_cast<void*>(remote + done), len - done};
    ssize_t n = into_peer ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return Status::Unavailable("cross-memory {} of {} bytes at {:#x} in pid {}: {}",
                                 into_peer ? "write" : "read", len, remote, pid,
                                 n == 0 ? "no progress" : std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return {};
}

bool probe_cma(pid_t pid, uint64_t addr, uint64_t expect, const std::string& peer) {
  uint64_t got = 0;
  iovec local{&got, sizeof got};
  iovec remote{reinterpret_cast<void*>(addr), sizeof got};
  int err = 0;
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(sizeof got))
    err = errno;
  else if (got != expect)
    err = EPROTO;
  if (err == 0) return true;
  explain_cma_refusal(pid, err, peer);
  return false;
}

size_t Channel::committed_bytes() noexcept { return g_committed.load(std::memory_order_relaxed); }

Channel::~Channel() {
  if (committed_) g_committed.fetch_sub(bytes_, std::memory_order_relaxed);
  if (base_ != nullptr) munmap(base_, bytes_);
  if (memfd_ >= 0) close(memfd_);
  if (sock_ >= 0) close(sock_);
  int db = peer_doorbell_.load();
  if (db >= 0) close(db);
}

Status Channel::map(int memfd, size_t bytes, bool init, size_t ring, size_t bulk, size_t commit_max) {
  if (bytes < kDataOffset) return Status::Protocol("shm: the peer's segment of {} bytes is too small", bytes);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (p == MAP_FAILED) return Status::Unavailable("shm: mmap {} bytes: {}", bytes, std::strerror(errno));
  base_ = p;
  bytes_ = bytes;
  auto* b = static_cast<std::byte*>(p);
  seg_ = reinterpret_cast<SegmentHeader*>(b);
  if (!init) {
    if (seg_->magic != SegmentHeader::kMagic || seg_->version != SegmentHeader::kVersion)
      return Status::Protocol("shm: the peer's segment is not a podnet segment of version {}", SegmentHeader::kVersion);
    ring = seg_->ring_bytes;
    bulk = seg_->bulk_bytes;
    if (!valid_sizes(ring, bulk) || segment_bytes(ring, bulk) != bytes)
      return Status::Protocol(
          "shm: the peer's segment of {} bytes does not hold rings of {} and bulk areas of {} bytes", bytes, ring,
          bulk);
  }
  // Commit and map every page now that the sizes are known to be ours or checked (as NCCL's
  // posix_fallocate of its segments does the first half), within the process's budget: a
  // page first touched on the data path costs a fault there, and on the side that created
  // the segment a zeroed allocation too (~1.4 us a page here: the first 5 MiB through a
  // direction of a channel ran 3-4x slower than the rest, docs/shm.md "Segments"). Memory
  // short: an error now, naming the size, instead of the OOM killer mid-transfer. Kernels
  // before 5.14 (EINVAL) fault pages in as they are touched.
  committed_ = reserve_commit(bytes, commit_max);
  if (committed_ && madvise(p, bytes, MADV_POPULATE_WRITE) != 0 && errno != EINVAL)
    return Status::Unavailable("shm: committing the {}-byte segment (PODNET_SHM_COMMIT): {}", bytes,
                               std::strerror(errno));
  auto* req_ctl = reinterpret_cast<RingCtl*>(b + kCtlOffset);
  auto* rep_ctl = reinterpret_cast<RingCtl*>(b + kCtlOffset + sizeof(RingCtl));
  if (init) {
    new (seg_) SegmentHeader{};
    seg_->ring_bytes = static_cast<uint32_t>(ring);
    seg_->bulk_bytes = static_cast<uint32_t>(bulk);
    seg_->version = SegmentHeader::kVersion;
    new (req_ctl) RingCtl{};
    new (rep_ctl) RingCtl{};
    seg_->magic = SegmentHeader::kMagic;
  }
  std::byte* req_data = b + kDataOffset;
  std::byte* rep_data = req_data + ring;
  std::byte* req_bulk = rep_data + ring;
  std::byte* rep_bulk = req_bulk + bulk;
  const bool connector = role_ == Role::kConnector;
  tx_.init(connector ? req_ctl : rep_ctl, connector ? req_data : rep_data, ring);
  rx_.init(connector ? rep_ctl : req_ctl, connector ? rep_data : req_data, ring);
  if (bulk != 0) {
    tx_.init_bulk(connector ? req_bulk : rep_bulk, bulk);
    rx_.init_bulk(connector ? rep_bulk : req_bulk, bulk);
  }
  return {};
}

bool Channel::valid_sizes(size_t ring, size_t bulk) {
  auto pow2 = [](size_t v) { return v != 0 && (v & (v - 1)) == 0; };
  return pow2(ring) && ring >= kMinRing && ring <= kMaxRing &&
         (bulk == 0 || (pow2(bulk) && bulk >= kMinBulk && bulk <= kMaxRing));
}

Result<std::shared_ptr<Channel>> Channel::connect(const std::string& socket_name, size_t ring_bytes, size_t bulk_bytes,
                                                  uint64_t my_id, int my_rank, int my_doorbell, size_t commit_max) {
  if (!valid_sizes(ring_bytes, bulk_bytes))
    return Status::InvalidArgument("shm: rings of {} and bulk areas of {} bytes", ring_bytes, bulk_bytes);
  std::shared_ptr<Channel> c(new Channel());
  c->role_ = Role::kConnector;
  c->memfd_ = memfd_create("podnet-shm", MFD_CLOEXEC);
  if (c->memfd_ < 0) return Status::Unavailable("shm: memfd_create: {}", std::strerror(errno));
  size_t bytes = segment_bytes(ring_bytes, bulk_bytes);
  if (ftruncate(c->memfd_, static_cast<off_t>(bytes)) != 0)
    return Status::Unavailable("shm: ftruncate {} bytes: {}", bytes, std::strerror(errno));
  PODNET_RETURN_IF_ERROR(c->map(c->memfd_, bytes, /*init=*/true, ring_bytes, bulk_bytes, commit_max));

  c->sock_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->sock_ < 0) return Status::Unavailable("shm: socket: {}", std::strerror(errno));
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (socket_name.size() + 1 > sizeof sa.sun_path) return Status::InvalidArgument("shm: socket name too long");
  std::memcpy(sa.sun_path + 1, socket_name.data(), socket_name.size());  // abstract namespace
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + socket_name.size());
  int rc = -1;
  for (int attempt = 0; attempt < 200; ++attempt) {  // EAGAIN: the listener's backlog is full
    rc = ::connect(c->sock_, reinterpret_cast<sockaddr*>(&sa), len);
    if (rc == 0 || errno != EAGAIN) break;
    usleep(1000);
  }
  if (rc != 0) return Status::Unavailable("shm: connect to @{}: {}", socket_name, std::strerror(errno));
  Hello h;
  h.ctx_id = my_id;
  h.rank = my_rank;
  h.pid = getpid();
  h.probe_addr = reinterpret_cast<uint64_t>(&c->seg_->magic);
  int fds[2] = {c->memfd_, my_doorbell};
  PODNET_RETURN_IF_ERROR(send_hello(c->sock_, h, fds, 2));
  return c;
}

Result<std::shared_ptr<Channel>> Channel::accept(int sock, int memfd, int peer_doorbell, pid_t peer_pid,
                                                 size_t commit_max) {
  std::shared_ptr<Channel> c(new Channel());
  c->role_ = Role::kAcceptor;
  c->sock_ = sock;
  c->memfd_ = memfd;
  c->peer_doorbell_.store(peer_doorbell);
  c->peer_pid_ = peer_pid;
  c->same_process_.store(peer_pid == getpid(), std::memory_order_relaxed);
  struct stat st {};
  if (fstat(memfd, &st) != 0) return Status::Unavailable("shm: fstat: {}", std::strerror(errno));
  PODNET_RETURN_IF_ERROR(c->map(memfd, static_cast<size_t>(st.st_size), /*init=*/false, 0, 0, commit_max));
  c->ready_.store(true, std::memory_order_release);
  return c;
}

void Channel::set_ready(pid_t peer_pid, bool cma, bool cma_push, int peer_doorbell) {
  peer_pid_ = peer_pid;
  same_process_.store(peer_pid == getpid(), std::memory_order_relaxed);
  peer_doorbell_.store(peer_doorbell, std::memory_order_release);
  cma_.store(cma, std::memory_order_release);
  cma_push_.store(cma && cma_push, std::memory_order_release);
  ready_.store(true, std::memory_order_release);
}

Status Channel::send_reply(bool cma, int my_doorbell) {
  Hello h;
  h.kind = Hello::kReply;
  h.pid = getpid();
  h.cma = cma ? 1 : 0;
  h.probe_addr = reinterpret_cast<uint64_t>(&seg_->magic);
  return send_hello(sock_, h, &my_doorbell, 1);
}

void Channel::say_bye() {
  Hello h;
  h.kind = Hello::kBye;
  (void)send_hello(sock_, h, nullptr, 0);
}

void Channel::hang_up() { ::shutdown(sock_, SHUT_RDWR); }

void Channel::ring_peer() {
  int fd = peer_doorbell_.load(std::memory_order_acquire);
  if (fd < 0) return;  // the acceptor polls its rings right after it attaches
  uint64_t one = 1;
  ssize_t n = write(fd, &one, sizeof one);
  (void)n;  // EAGAIN: a wake-up is pending already
}

bool Channel::emit(OutOp& op) {
  const size_t frag = max_fragment();
  const std::byte* src = op.owned.empty() ? op.src : reinterpret_cast<const std::byte*>(op.owned.data());
  do {
    size_t chunk = op.fragments ? std::min(frag, op.len - op.done) : op.len;
    std::byte* dst = nullptr;
    if (tx_.reserve_payload(chunk, &dst) == nullptr) return false;
    RecHdr hdr = op.hdr;
    hdr.plen = static_cast<uint32_t>(chunk);
    if (op.fragments) {
      hdr.aux = op.done;
      hdr.flags = static_cast<uint8_t>(op.hdr.flags & ~(kFirst | kLast | kNotify));
      if (op.done == 0) hdr.flags |= kFirst;
      if (op.done + chunk == op.len) hdr.flags |= (kLast | (op.hdr.flags & kNotify));
    }
    if (chunk > 0) std::memcpy(dst, src + op.done, chunk);
    tx_.commit(hdr);  // the header last: it publishes the record
    op.done += chunk;
  } while (op.done < op.len);
  return true;
}

namespace {
std::atomic<uint64_t> g_local_publishes{0};
}  // namespace

uint64_t Channel::local_publishes() noexcept { return g_local_publishes.load(std::memory_order_acquire); }

void Channel::publish_tx() {
  if (tx_.publish()) ring_peer();
  if (same_process_.load(std::memory_order_relaxed)) g_local_publishes.fetch_add(1, std::memory_order_acq_rel);
}

Channel::Posted Channel::post(OutOp& op, Completions& done, const std::shared_ptr<detail::RequestState>* req) {
  std::lock_guard lk(tx_mu_);
  if (closed_) return Posted::kRefused;
  const bool was_empty = queued_.empty();
  if (was_empty && ready()) {
    bool finished = emit(op);
    publish_tx();
    if (finished) {
      if (req == nullptr && op.on_emitted) done.push_back(std::move(op.on_emitted));
      return Posted::kEmitted;
    }
  }
  if (req != nullptr) op.on_emitted = *req;
  queued_.push_back(std::move(op));
  has_queued_.store(true, std::memory_order_release);
  return was_empty ? Posted::kQueuedFirst : Posted::kQueued;
}

bool Channel::try_emit_record(RecHdr hdr, const void* src, size_t len) {
  if (len > max_fragment()) return false;
  std::lock_guard lk(tx_mu_);
  if (closed_ || !queued_.empty() || !ready()) return false;
  std::byte* dst = nullptr;
  if (tx_.reserve_payload(len, &dst) == nullptr) return false;
  hdr.plen = static_cast<uint32_t>(len);
  if (len > 0) std::memcpy(dst, src, len);
  tx_.commit(hdr);
  publish_tx();
  return true;
}

std::vector<std::shared_ptr<detail::RequestState>> Channel::close_queue() {
  std::vector<std::shared_ptr<detail::RequestState>> reqs;
  std::lock_guard lk(tx_mu_);
  closed_ = true;
  for (auto& op : queued_)
    if (op.on_emitted) reqs.push_back(std::move(op.on_emitted));
  queued_.clear();
  has_queued_.store(false, std::memory_order_release);
  return reqs;
}

int Channel::drain(Completions& done) {
  if (!has_queued_.load(std::memory_order_acquire) || !ready()) return 0;
  std::unique_lock lk(tx_mu_, std::try_to_lock);
  if (!lk.owns_lock()) return 0;
  int n = 0;
  while (!queued_.empty() && n < kMaxRecordsPerDrain) {
    OutOp& op = queued_.front();
    bool finished = emit(op);
    if (!finished) break;
    if (op.on_emitted) done.push_back(std::move(op.on_emitted));
    queued_.pop_front();
    ++n;
  }
  has_queued_.store(!queued_.empty(), std::memory_order_release);
  publish_tx();
  return n;
}

bool Channel::has_queued() { return has_queued_.load(std::memory_order_acquire); }

bool Channel::arm() {
  {
    std::unique_lock lk(rx_mu_, std::try_to_lock);
    if (!lk.owns_lock()) return false;  // someone is consuming right now
    if (!rx_.arm()) return false;
  }
  if (has_queued() && ready()) {
    std::unique_lock lk(tx_mu_, std::try_to_lock);
    if (!lk.owns_lock()) return false;
    if (!queued_.empty()) {
      const OutOp& op = queued_.front();
      if (!tx_.arm_for_payload(op.fragments ? std::min(max_fragment(), op.len - op.done) : op.len)) return false;
    }
  }
  return true;
}

void Channel::disarm() {
  rx_.disarm();
  tx_.disarm();
}

void Channel::beat() noexcept {
  seg_->heartbeat[role_ == Role::kConnector ? 0 : 1].fetch_add(1, std::memory_order_relaxed);
}

uint64_t Channel::peer_heartbeat() const noexcept {
  return seg_->heartbeat[role_ == Role::kConnector ? 1 : 0].load(std::memory_order_relaxed);
}

}  // namespace podnet::shm
