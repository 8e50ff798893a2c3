#include <podnet/xfer.h>

#include "transport/progress.h"
#include "transport/request.h"

namespace podnet {
namespace {
// A send or receive this large found complete: the application is streaming and waits again
// soon, so the background thread stays parked (note_active) as for one-sided requests. Small
// ones do not: prompt background progress keeps small collectives' forwarding fast
// (docs/performance.md, "Nor does it wake for every reply").
constexpr size_t kBulkBytes = 256 * 1024;
}  // namespace

bool Request::test() {
  if (done_at_post_) return true;
  if (!state_) return false;
  if (state_->done()) return true;
  if (detail::ProgressEngine* e = state_->engine()) e->drive();  // the background thread stays parked
  return state_->done();
}

bool Request::done() const noexcept { return done_at_post_ || (state_ && state_->done()); }

Status Request::wait(std::chrono::nanoseconds timeout) {
  if (done_at_post_) return {};
  if (!state_) return Status::InvalidArgument("wait on an invalid request");
  if (state_->done()) {
    if (detail::ProgressEngine* e = state_->engine();
        e != nullptr && (state_->one_sided() || state_->bytes >= kBulkBytes))
      e->note_active();
    return state_->status();
  }
  return state_->engine()->wait(*state_, timeout.count());
}

Status Request::status() const {
  if (done_at_post_) return {};
  if (!state_) return Status::InvalidArgument("status of an invalid request");
  return state_->status();
}

size_t Request::bytes() const { return done_at_post_ ? bytes_ : state_ ? state_->bytes : 0; }
uint64_t Request::tag() const { return done_at_post_ ? tag_ : state_ ? state_->tag : 0; }
uint64_t Request::imm() const { return state_ ? state_->imm : 0; }
uint64_t Request::seq() const { return done_at_post_ ? seq_ : state_ ? state_->seq() : 0; }

void Request::on_complete(std::function<void(const Status&)> callback) {
  if (done_at_post_) {
    if (callback) callback(Status::Ok());
    return;
  }
  if (state_) state_->on_complete(std::move(callback));
}

}  // namespace podnet
