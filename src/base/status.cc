#include <podnet/status.h>

namespace podnet {

std::string_view code_name(Code code) noexcept {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: return "invalid-argument";
    case Code::kTimeout: return "timeout";
    case Code::kUnavailable: return "unavailable";
    case Code::kAccessDenied: return "access-denied";
    case Code::kProtocol: return "protocol";
    case Code::kPeerFailed: return "peer-failed";
    case Code::kTransportFailed: return "transport-failed";
    case Code::kCancelled: return "cancelled";
    case Code::kInternal: return "internal";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return fmt::format("{}: {}", code_name(code_), message_);
}

}  // namespace podnet
