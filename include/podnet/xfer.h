// The transfer engine: podnet's generic IO API. RDMA-shaped, so that verbs maps onto it one
// to one while TCP and shared memory emulate it.
//
//   auto ctx = Context::create({}).value();
//   auto mr  = ctx->register_memory(buf, len, Access::kRemoteWrite).value();
//   share mr.remote_key().serialize() and ctx->address() with the peer (e.g. via the store)
//   auto ep  = ctx->connect(peer_address).value();
//   Request r = ep->write(mr, 0, peer_key, 0, len);
//   Status st = r.wait(std::chrono::seconds(10));
//
// Completion semantics (what "done" means for each operation):
//   write / write_notify  data is placed in the target's memory (the target acknowledged it);
//                         the local buffer is reusable. write_notify's notification is
//                         delivered to the target after the data is in place.
//   read                  the data is in the local buffer.
//   send                  the payload has left the local buffer (copied into the kernel or
//                         delivered); the buffer is reusable. Not a proof of receipt.
//   recv / recv_notify    a matching message (notification) arrived and is in the buffer.
// Requests of one endpoint complete in any order; messages (send/recv and notifications)
// are matched in the order the sender posted them.
//
// Thread-safety: every method of Context, Endpoint and Request may be called from any
// thread. Errors never throw: a failed post returns a Request that is already complete with
// the error. Every Status names the peer (rank, host:port), the operation and its sequence
// number.
#pragma once

#include <podnet/status.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace podnet {

namespace detail {
class RequestState;
class ContextImpl;
class RegionState;
class EndpointImpl;
}  // namespace detail

// Access rights of a registered region. Local access is always allowed.
enum class Access : uint32_t {
  kNone = 0,
  kRemoteRead = 1u << 0,
  kRemoteWrite = 1u << 1,
  kRemoteReadWrite = kRemoteRead | kRemoteWrite,
};
constexpr Access operator|(Access a, Access b) {
  return static_cast<Access>(static_cast<uint32_t>(a) | static_cast<uint32_t>(b));
}
constexpr bool has_access(Access granted, Access wanted) {
  return (static_cast<uint32_t>(granted) & static_cast<uint32_t>(wanted)) == static_cast<uint32_t>(wanted);
}

// What a peer needs to address a registered region: serialisable, opaque to the user.
struct RemoteKey {
  uint64_t addr = 0;     // base address in the owner's address space
  uint64_t length = 0;   // bytes
  uint64_t key = 0;      // unguessable; invalid after deregistration
  uint64_t owner = 0;    // owning context's id
  Access access = Access::kNone;

  std::string serialize() const;  // fixed 40-byte binary blob
  static Result<RemoteKey> deserialize(std::string_view blob);
};

// A completion handle. Copyable (shared state). A default-constructed Request is invalid.
// An operation that completed as it was posted (a small send that went out at once) may
// come back as a request without shared state: done, ok, with its bytes, tag and seq.
class Request {
 public:
  Request() = default;
  explicit Request(std::shared_ptr<detail::RequestState> state) : state_(std::move(state)) {}

  bool valid() const noexcept { return state_ != nullptr || done_at_post_; }
  // Drives progress once without blocking; true when complete.
  bool test();
  bool done() const noexcept;
  // Spins briefly, then blocks, until complete or `timeout` passes. Returns the request's
  // status, or kTimeout (the request stays pending and may still complete).
  Status wait(std::chrono::nanoseconds timeout);
  Status status() const;       // the final status once done()
  size_t bytes() const;        // bytes received (recv), transferred otherwise
  uint64_t tag() const;        // the matched message's tag (recv)
  uint64_t imm() const;        // the immediate value (recv_notify)
  uint64_t seq() const;        // per-endpoint sequence number of the operation
  // Called exactly once when the request completes, from the thread that completes it (or
  // right away if already complete). Must not block.
  void on_complete(std::function<void(const Status&)> callback);

 private:
  friend class detail::EndpointImpl;
  // Complete from the start (see the class comment): no RequestState to allocate.
  static Request completed_at_post(size_t bytes, uint64_t tag, uint64_t seq) noexcept {
    Request r;
    r.done_at_post_ = true;
    r.bytes_ = bytes;
    r.tag_ = tag;
    r.seq_ = seq;
    return r;
  }

  std::shared_ptr<detail::RequestState> state_;
  bool done_at_post_ = false;
  size_t bytes_ = 0;
  uint64_t tag_ = 0, seq_ = 0;
};

// A registered memory region; deregisters on destruction. Move-only.
class MemoryRegion {
 public:
  MemoryRegion() = default;
  explicit MemoryRegion(std::shared_ptr<detail::RegionState> state);
  MemoryRegion(MemoryRegion&&) noexcept = default;
  MemoryRegion& operator=(MemoryRegion&&) noexcept;
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;
  ~MemoryRegion();

  bool valid() const noexcept { return state_ != nullptr; }
  std::byte* data() const noexcept;
  size_t size() const noexcept;
  Access access() const noexcept;
  RemoteKey remote_key() const;
  // Invalidates the remote key; blocks until no remote operation is touching the memory.
  void deregister();

  const std::shared_ptr<detail::RegionState>& state() const { return state_; }

 private:
  std::shared_ptr<detail::RegionState> state_;
};

// A connection to one peer. Obtained from Context::connect. Thread-safe.
class Endpoint {
 public:
  virtual ~Endpoint() = default;
  virtual int peer_rank() const noexcept = 0;
  virtual std::string peer_name() const = 0;       // "rank 3 (10.0.0.2:4000)"
  virtual std::string_view transport() const noexcept = 0;

  // One-sided: copies len bytes from local[local_off] to the peer's region at remote_off.
  virtual Request write(const MemoryRegion& local, size_t local_off, const RemoteKey& remote,
                        uint64_t remote_off, size_t len) = 0;
  // As write; then the peer's recv_notify() for this endpoint completes with `imm`.
  virtual Request write_notify(const MemoryRegion& local, size_t local_off, const RemoteKey& remote,
                               uint64_t remote_off, size_t len, uint64_t imm) = 0;
  // One-sided: copies len bytes from the peer's region at remote_off into local[local_off].
  virtual Request read(const MemoryRegion& local, size_t local_off, const RemoteKey& remote,
                       uint64_t remote_off, size_t len) = 0;
  // Tagged message. The buffer need not be registered and is reusable at completion.
  virtual Request send(const void* buf, size_t len, uint64_t tag) = 0;
  // Matches the next message from this peer whose tag satisfies (tag & mask) == (want & mask);
  // a message longer than `capacity` completes the request with kInvalidArgument.
  virtual Request recv(void* buf, size_t capacity, uint64_t tag, uint64_t tag_mask = ~0ull) = 0;
  // Completes with the next write_notify immediate from this peer (Request::imm()).
  virtual Request recv_notify() = 0;
  // Cancels the posted receives whose own tag matches `tag` under `tag_mask` and that no
  // message has reached yet; they complete with kCancelled. A receive whose message is
  // already being copied in (matched) completes as usual. Returns how many were cancelled.
  virtual size_t cancel_recvs(uint64_t tag, uint64_t tag_mask = ~0ull) = 0;
  // A failed endpoint's first error (sticky); ok while healthy.
  virtual Status health() const = 0;
};

// Swaps remote keys with the peer of `ep` over a tagged message pair (both sides call it
// with the same tag): sends `mine`, returns the peer's. Blocks up to `timeout` for each.
Result<RemoteKey> exchange_remote_key(Endpoint& ep, const RemoteKey& mine, uint64_t tag,
                                      std::chrono::nanoseconds timeout);

struct ContextOptions {
  int rank = -1;                // shown in errors and logs; -1: from PODNET_RANK
  std::string bind_address;     // IPv4 address to listen on; empty: PODNET_IFNAME selection
  uint16_t port = 0;            // 0: any free port
};

class Context {
 public:
  static Result<std::unique_ptr<Context>> create(const ContextOptions& options = {});
  virtual ~Context() = default;

  virtual int rank() const noexcept = 0;
  // The blob a peer passes to connect(): addresses, transports, identity. Binary; treat as
  // opaque bytes.
  virtual std::string address() const = 0;
  virtual std::string listen_address() const = 0;  // "host:port", for humans

  virtual Result<MemoryRegion> register_memory(void* ptr, size_t len, Access access) = 0;
  // Allocates `len` bytes (zeroed, page-aligned) and registers them. Peers on the same host
  // map such memory: their one-sided write and read on it are a plain memcpy, complete when
  // the call returns (no system call, nothing for this side to do; PODNET_SHM_MAP).
  // The memory lives as long as the region: data() is invalid after deregister().
  virtual Result<MemoryRegion> allocate_memory(size_t len, Access access) = 0;
  // Never blocks: the connection is made in the background and the first requests wait for
  // it. Connecting twice to the same peer returns the same endpoint.
  virtual Result<std::shared_ptr<Endpoint>> connect(std::string_view peer_address) = 0;
  // Drives progress once (for users who poll instead of waiting).
  virtual void progress() = 0;
};

}  // namespace podnet
