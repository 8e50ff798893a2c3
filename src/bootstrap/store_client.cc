// StoreClient: one non-blocking socket driven with poll(), one request in flight at a time.
// Replies are read into a buffer and decoded by wire::decode, so a timeout never leaves the
// stream half-read. A wait that times out is cancelled on the server, which answers the wait
// with the keys still missing; that is how the error can name them. Any I/O or protocol
// failure is sticky: every later call returns it.
//
// Requests other than wait/barrier carry no timeout of their own; they may take at most
// max(connect timeout, kMinIoTimeout), so a frozen server turns into an error, not a hang.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <thread>

#include "base/log.h"
#include "bootstrap/socket_util.h"
#include "bootstrap/store.h"
#include "bootstrap/store_wire.h"

namespace podnet::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using wire::Frame;
using wire::Type;

constexpr milliseconds kMinIoTimeout{5000};
constexpr milliseconds kFirstBackoff{10};
constexpr milliseconds kMaxBackoff{1000};
constexpr milliseconds kMinHelloTime{500};

int64_t ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration_cast<milliseconds>(to - from).count();
}

class Client final : public StoreClient {
 public:
  Client(int fd, std::string address, milliseconds io_timeout)
      : fd_(fd), address_(std::move(address)), io_timeout_(io_timeout) {}
  ~Client() override { ::close(fd_); }

  Status hello(Clock::time_point deadline);
  Status set(const std::string& key, const std::string& value) override;
  Result<std::string> get(const std::string& key) override;
  Status wait(const std::vector<std::string>& keys, milliseconds timeout) override;
  Result<std::string> wait_get(const std::string& key, milliseconds timeout) override;
  Result<int64_t> add(const std::string& key, int64_t delta) override;
  Result<std::string> compare_set(const std::string& key, const std::optional<std::string>& expected,
                                  const std::string& desired) override;
  Result<bool> erase(const std::string& key) override;
  Status barrier(const std::string& name, int world_size, milliseconds timeout) override;

 private:
  Status send_frame(Frame& f, Clock::time_point deadline, const std::string& what);
  // Timeout (stream still in sync) when no whole frame arrives before the deadline.
  Result<Frame> recv_frame(Clock::time_point deadline, const std::string& what);
  // Sends `req` and returns its reply, which must be one of `ok_types`; error replies
  // become their Status.
  Status unusable(const std::string& what) const {
    return error(broken_.code(), what, "connection unusable after an earlier error ({})", broken_.message());
  }
  Result<Frame> call(Frame req, std::initializer_list<Type> ok_types, const std::string& what,
                     std::optional<Clock::time_point> deadline = std::nullopt);
  // The Status an error reply carries; a protocol error also ends the connection.
  Status server_error(const Frame& reply, const std::string& what);
  Status check_key(const std::string& key, const std::string& what) const;
  Status fatal(Status s) {
    broken_ = s;
    return s;
  }
  template <typename... A>
  Status error(Code code, const std::string& what, fmt::format_string<A...> f, A&&... a) const {
    return Status(code, fmt::format("store {}: {}: ", address_, what) + fmt::format(f, std::forward<A>(a)...));
  }

  const int fd_;
  const std::string address_;
  const milliseconds io_timeout_;
  uint32_t next_seq_ = 1;
  std::string in_;
  Status broken_;
};

Status Client::send_frame(Frame& f, Clock::time_point deadline, const std::string& what) {
  f.seq = next_seq_++;
  std::string bytes = wire::encode(f);
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n >= 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return fatal(error(Code::kPeerFailed, what, "send: {}", errno_text(errno)));
    int64_t left = ms_between(Clock::now(), deadline);
    pollfd p{fd_, POLLOUT, 0};
    if (left <= 0 || (::poll(&p, 1, static_cast<int>(left)) < 0 && errno != EINTR))
      return fatal(error(left <= 0 ? Code::kTimeout : Code::kPeerFailed, what, "send: {}",
                         left <= 0 ? "server not reading" : errno_text(errno)));
  }
  return Status::Ok();
}

Result<Frame> Client::recv_frame(Clock::time_point deadline, const std::string& what) {
  while (true) {
    wire::Decoded d = wire::decode(in_);
    if (d.kind == wire::Decoded::Kind::kFrame) {
      in_.erase(0, d.consumed);
      if (wire::is_request(d.frame.type))
        return fatal(error(Code::kProtocol, what, "server sent a {} frame", wire::type_name(d.frame.type)));
      return std::move(d.frame);
    }
    if (d.kind == wire::Decoded::Kind::kBad) {
      if (d.peer_version != 0)
        return fatal(error(Code::kProtocol, what, "server speaks protocol version {}, this client speaks version {}",
                           d.peer_version, wire::kVersion));
      return fatal(error(Code::kProtocol, what, "bad reply: {}", d.error.message()));
    }
    int64_t left = ms_between(Clock::now(), deadline);
    if (left <= 0) return error(Code::kTimeout, what, "no reply");
    pollfd p{fd_, POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left + 1, INT32_MAX)));
    if (rc < 0 && errno != EINTR) return fatal(error(Code::kPeerFailed, what, "poll: {}", errno_text(errno)));
    if (rc <= 0) continue;
    char buf[64 * 1024];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n == 0) return fatal(error(Code::kPeerFailed, what, "connection closed by the server"));
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return fatal(error(Code::kPeerFailed, what, "recv: {}", errno_text(errno)));
    }
    in_.append(buf, static_cast<size_t>(n));
  }
}

Status Client::server_error(const Frame& reply, const std::string& what) {
  Status s(static_cast<Code>(reply.num), fmt::format("store {}: {}: server: {}", address_, what, reply.strs[0]));
  return reply.num == static_cast<int64_t>(Code::kProtocol) ? fatal(s) : s;
}

Result<Frame> Client::call(Frame req, std::initializer_list<Type> ok_types, const std::string& what,
                           std::optional<Clock::time_point> deadline) {
  if (!broken_.ok()) return unusable(what);
  auto start = Clock::now();
  auto until = deadline.value_or(start + io_timeout_);
  PODNET_RETURN_IF_ERROR(send_frame(req, until, what));
  auto reply = recv_frame(until, what);
  if (!reply.ok()) {
    // A reply that is late would arrive for the wrong request: the connection is done.
    if (reply.status().code() == Code::kTimeout)
      return fatal(error(Code::kTimeout, what, "no reply within {} ms", ms_between(start, until)));
    return reply.status();
  }
  if (reply->seq != req.seq)
    return fatal(error(Code::kProtocol, what, "reply for request {} while waiting for {}", reply->seq, req.seq));
  if (reply->type == Type::kError) return server_error(*reply, what);
  if (std::find(ok_types.begin(), ok_types.end(), reply->type) == ok_types.end())
    return fatal(error(Code::kProtocol, what, "unexpected {} reply", wire::type_name(reply->type)));
  return reply;
}

Status Client::check_key(const std::string& key, const std::string& what) const {
  if (key.empty() || key.size() > wire::kMaxKeyBytes)
    return error(Code::kInvalidArgument, what, "keys must be 1..{} bytes, not {}", wire::kMaxKeyBytes, key.size());
  return Status::Ok();
}

Status Client::hello(Clock::time_point deadline) {
  auto r = call({Type::kHello, 0, 0, 0, {}}, {Type::kOk}, "hello", deadline);
  return r.ok() ? Status::Ok() : r.status();
}

Status Client::set(const std::string& key, const std::string& value) {
  std::string what = "set " + wire::printable(key);
  PODNET_RETURN_IF_ERROR(check_key(key, what));
  if (value.size() > wire::kMaxValueBytes)
    return error(Code::kInvalidArgument, what, "value is {} bytes (limit {})", value.size(), wire::kMaxValueBytes);
  auto r = call({Type::kSet, 0, 0, 0, {key, value}}, {Type::kOk}, what);
  return r.ok() ? Status::Ok() : r.status();
}

Result<std::string> Client::get(const std::string& key) {
  std::string what = "get " + wire::printable(key);
  PODNET_RETURN_IF_ERROR(check_key(key, what));
  PODNET_ASSIGN_OR_RETURN(Frame r, call({Type::kGet, 0, 0, 0, {key}}, {Type::kValue, Type::kNotFound}, what));
  if (r.type == Type::kNotFound) return error(Code::kUnavailable, what, "no such key");
  return std::move(r.strs[0]);
}

Status Client::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  std::string what = "wait for " + wire::join_keys(keys);
  if (!broken_.ok()) return unusable(what);
  if (keys.empty() || keys.size() > wire::kMaxWaitKeys)
    return error(Code::kInvalidArgument, what, "wait takes 1..{} keys, not {}", wire::kMaxWaitKeys, keys.size());
  for (const auto& k : keys) PODNET_RETURN_IF_ERROR(check_key(k, what));

  Frame req{Type::kWait, 0, 0, 0, keys};
  auto start = Clock::now();
  PODNET_RETURN_IF_ERROR(send_frame(req, start + io_timeout_, what));
  auto reply = recv_frame(start + timeout, what);
  if (reply.ok()) {
    if (reply->seq == req.seq && reply->type == Type::kOk) return Status::Ok();
    if (reply->type == Type::kError) return server_error(*reply, what);
    return fatal(error(Code::kProtocol, what, "unexpected {} reply", wire::type_name(reply->type)));
  }
  if (reply.status().code() != Code::kTimeout) return reply.status();

  // Timed out: cancel, and learn from the wait's final answer which keys are still missing.
  Frame cancel{Type::kCancelWait, 0, 0, static_cast<int64_t>(req.seq), {}};
  auto io_deadline = Clock::now() + io_timeout_;
  PODNET_RETURN_IF_ERROR(send_frame(cancel, io_deadline, what));
  std::optional<Frame> outcome;
  while (true) {
    auto f = recv_frame(io_deadline, what);
    if (!f.ok()) return f.status().code() == Code::kTimeout ? fatal(f.status()) : f.status();
    if (f->seq == req.seq && (f->type == Type::kOk || f->type == Type::kMissing)) {
      outcome = std::move(*f);
    } else if (f->seq == cancel.seq && f->type == Type::kOk && outcome) {
      break;
    } else if (f->type == Type::kError) {
      return server_error(*f, what);
    } else {
      return fatal(error(Code::kProtocol, what, "unexpected {} reply for request {}", wire::type_name(f->type), f->seq));
    }
  }
  if (outcome->type == Type::kOk) return Status::Ok();  // the keys appeared just as time ran out
  return Status::Timeout("store {}: wait timed out after {} ms for keys {}", address_, timeout.count(),
                         wire::join_keys(outcome->strs));
}

Result<std::string> Client::wait_get(const std::string& key, milliseconds timeout) {
  PODNET_RETURN_IF_ERROR(wait({key}, timeout));
  return get(key);
}

Result<int64_t> Client::add(const std::string& key, int64_t delta) {
  std::string what = "add " + wire::printable(key);
  PODNET_RETURN_IF_ERROR(check_key(key, what));
  PODNET_ASSIGN_OR_RETURN(Frame r, call({Type::kAdd, 0, 0, delta, {key}}, {Type::kInt}, what));
  return r.num;
}

Result<std::string> Client::compare_set(const std::string& key, const std::optional<std::string>& expected,
                                        const std::string& desired) {
  std::string what = "compare_set " + wire::printable(key);
  PODNET_RETURN_IF_ERROR(check_key(key, what));
  if (desired.size() > wire::kMaxValueBytes || expected.value_or("").size() > wire::kMaxValueBytes)
    return error(Code::kInvalidArgument, what, "values are limited to {} bytes", wire::kMaxValueBytes);
  Frame req{Type::kCompareSet, 0, 0, expected ? 1 : 0, {key, expected.value_or(""), desired}};
  PODNET_ASSIGN_OR_RETURN(Frame r, call(std::move(req), {Type::kValue, Type::kNotFound}, what));
  if (r.type == Type::kNotFound) return error(Code::kUnavailable, what, "no such key");
  return std::move(r.strs[0]);
}

Result<bool> Client::erase(const std::string& key) {
  std::string what = "erase " + wire::printable(key);
  PODNET_RETURN_IF_ERROR(check_key(key, what));
  PODNET_ASSIGN_OR_RETURN(Frame r, call({Type::kErase, 0, 0, 0, {key}}, {Type::kInt}, what));
  return r.num != 0;
}

// Generation g of barrier `name` is complete when the arrival counter reaches (g+1)*n; the
// caller that gets there sets the generation's key, which everyone waits for. That caller
// also erases generation g-1's key: every rank has left that barrier before entering this one.
// All callers must pass the same world_size. A caller that times out stays counted, so the
// name is out of step afterwards; a timed-out barrier is meant to end the job, not be retried.
Status Client::barrier(const std::string& name, int world_size, milliseconds timeout) {
  std::string what = "barrier " + wire::printable(name);
  if (name.empty() || world_size < 1)
    return error(Code::kInvalidArgument, what, "needs a name and world_size >= 1 (got {})", world_size);
  std::string prefix = "podnet/barrier/" + name;
  std::string counter = prefix + "/arrived";
  PODNET_ASSIGN_OR_RETURN(int64_t arrived, add(counter, 1));
  int64_t gen = (arrived - 1) / world_size;
  auto gen_key = [&](int64_t g) { return fmt::format("{}/gen/{}", prefix, g); };
  if (arrived % world_size == 0) {
    PODNET_RETURN_IF_ERROR(set(gen_key(gen), ""));
    if (gen > 0) {
      auto erased = erase(gen_key(gen - 1));
      if (!erased.ok()) return erased.status();
    }
  }
  Status s = wait({gen_key(gen)}, timeout);
  if (s.code() != Code::kTimeout) return s;
  std::string count = "an unknown number";
  auto now = get(counter);
  int64_t total = 0;
  if (now.ok() && std::from_chars(now->data(), now->data() + now->size(), total).ec == std::errc())
    count = std::to_string(std::clamp<int64_t>(total - gen * world_size, 0, world_size));
  return Status::Timeout("store {}: barrier {} (generation {}) timed out after {} ms: {} of {} ranks arrived",
                         address_, wire::printable(name), gen, timeout.count(), count, world_size);
}

// One connection attempt. Returns the connected socket, or the reason it failed.
Result<int> connect_once(const HostPort& hp, Clock::time_point deadline) {
  PODNET_ASSIGN_OR_RETURN(sockaddr_in sa, resolve_ipv4(hp.host, hp.port));
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Unavailable("socket: {}", errno_text(errno));
  int err = 0;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int64_t left = std::max<int64_t>(ms_between(Clock::now(), deadline), 1);
      int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, INT32_MAX)));
      socklen_t len = sizeof err;
      if (rc == 0)
        err = ETIMEDOUT;
      else if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    }
  }
  if (err != 0) {
    ::close(fd);
    return Status::Unavailable("connect: {}", errno_text(err));
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // best effort: latency only
  return fd;
}

}  // namespace

Result<std::unique_ptr<StoreClient>> StoreClient::connect(const std::string& address, milliseconds timeout) {
  PODNET_ASSIGN_OR_RETURN(HostPort hp, parse_host_port(address));
  auto start = Clock::now();
  auto deadline = start + timeout;
  milliseconds backoff = kFirstBackoff;
  std::string last_error;
  for (int attempt = 1;; ++attempt) {
    auto fd = connect_once(hp, deadline);
    if (fd.ok()) {
      auto client = std::make_unique<Client>(*fd, address, std::max(timeout, kMinIoTimeout));
      Status s = client->hello(std::max(deadline, Clock::now() + kMinHelloTime));
      if (s.ok()) {
        PODNET_DEBUG(kBoot, "store {}: connected after {} attempt(s)", address, attempt);
        return std::unique_ptr<StoreClient>(std::move(client));
      }
      if (s.code() == Code::kProtocol) return s;  // another version or not a store: retrying cannot help
      // Drop our own "store ADDR: " prefix: the timeout message below starts with it.
      std::string prefix = fmt::format("store {}: ", address);
      last_error = s.message().starts_with(prefix) ? s.message().substr(prefix.size()) : s.message();
    } else {
      last_error = fd.status().message();
    }
    auto now = Clock::now();
    if (now >= deadline)
      return Status::Timeout("store {}: connect timed out after {} ms ({} attempts; last error: {})", address,
                             timeout.count(), attempt, last_error);
    PODNET_DEBUG(kBoot, "store {}: attempt {}: {}; retrying in {} ms", address, attempt, last_error, backoff.count());
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

}  // namespace podnet::bootstrap
