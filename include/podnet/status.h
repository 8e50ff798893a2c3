// podnet's one error model: Status (a code plus a message with context) and Result<T>.
// No exceptions cross or live inside the library. Codes are grouped by how much of the
// system an error breaks: one request (kInvalidArgument, kTimeout, kAccessDenied), one peer
// (kPeerFailed), a whole transport (kTransportFailed), or the process (kInternal).
#pragma once

#include <fmt/format.h>

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace podnet {

enum class Code : int {
  kOk = 0,
  kInvalidArgument,  // the caller passed something wrong
  kTimeout,          // a wait ran past its deadline; the operation may still complete
  kUnavailable,      // not possible here (no device, not connected yet, not supported)
  kAccessDenied,     // a remote key, bounds or access check refused a one-sided operation
  kProtocol,         // a peer sent something malformed or of another version
  kPeerFailed,       // one endpoint is dead: closed, killed or silent past the timeout
  kTransportFailed,  // a whole transport is unusable
  kCancelled,        // the request was cancelled or its context shut down
  kInternal,         // a bug in podnet
};

std::string_view code_name(Code code) noexcept;

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  template <typename... A>
  static Status Make(Code c, fmt::format_string<A...> f, A&&... a) {
    return Status(c, fmt::format(f, std::forward<A>(a)...));
  }
#define PODNET_STATUS_FACTORY(Name)                                      \
  template <typename... A>                                               \
  static Status Name(fmt::format_string<A...> f, A&&... a) {             \
    return Status(Code::k##Name, fmt::format(f, std::forward<A>(a)...)); \
  }
  PODNET_STATUS_FACTORY(InvalidArgument)
  PODNET_STATUS_FACTORY(Timeout)
  PODNET_STATUS_FACTORY(Unavailable)
  PODNET_STATUS_FACTORY(AccessDenied)
  PODNET_STATUS_FACTORY(Protocol)
  PODNET_STATUS_FACTORY(PeerFailed)
  PODNET_STATUS_FACTORY(TransportFailed)
  PODNET_STATUS_FACTORY(Cancelled)
  PODNET_STATUS_FACTORY(Internal)
#undef PODNET_STATUS_FACTORY

  bool ok() const noexcept { return code_ == Code::kOk; }
  Code code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  // "peer-failed: rank 3 (10.0.0.2:4000): recv: Connection reset by peer"
  std::string to_string() const;

  // Adds context at a layer boundary: "allreduce seq 42: " + message.
  template <typename... A>
  Status with_context(fmt::format_string<A...> f, A&&... a) const {
    if (ok()) return *this;
    return Status(code_, fmt::format(f, std::forward<A>(a)...) + ": " + message_);
  }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).ok()); }

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace podnet

// Early return on error, for Status and Result<T>.
#define PODNET_RETURN_IF_ERROR(expr)           \
  do {                                         \
    ::podnet::Status _st = (expr);             \
    if (!_st.ok()) return _st;                 \
  } while (0)

#define PODNET_CONCAT_INNER(a, b) a##b
#define PODNET_CONCAT(a, b) PODNET_CONCAT_INNER(a, b)
#define PODNET_ASSIGN_OR_RETURN(lhs, expr)                                                  \
  auto PODNET_CONCAT(_res_, __LINE__) = (expr);                                             \
  if (!PODNET_CONCAT(_res_, __LINE__).ok()) return PODNET_CONCAT(_res_, __LINE__).status(); \
  lhs = std::move(PODNET_CONCAT(_res_, __LINE__)).value()  // NOLINT(bugprone-macro-parentheses): lhs may declare
