#include "bootstrap/store_state.h"

#include <algorithm>
#include <charconv>

namespace podnet::bootstrap {

using wire::Frame;
using wire::Type;

void StoreState::reply(uint64_t conn, uint32_t seq, Type type, int64_t num, std::vector<std::string> strs) {
  send_(conn, Frame{type, 0, seq, num, std::move(strs)});
}

Status StoreState::handle(uint64_t conn, Frame& req) {
  switch (req.type) {
    case Type::kSet: {
      auto [it, inserted] = kv_.insert_or_assign(req.strs[0], std::move(req.strs[1]));
      reply(conn, req.seq, Type::kOk);
      if (inserted) key_created(it->first);
      return Status::Ok();
    }
    case Type::kGet: {
      auto it = kv_.find(req.strs[0]);
      if (it == kv_.end()) reply(conn, req.seq, Type::kNotFound);
      else reply(conn, req.seq, Type::kValue, 0, {it->second});
      return Status::Ok();
    }
    case Type::kWait: return handle_wait(conn, req);
    case Type::kCancelWait: handle_cancel(conn, req); return Status::Ok();
    case Type::kAdd: handle_add(conn, req); return Status::Ok();
    case Type::kCompareSet: handle_compare_set(conn, req); return Status::Ok();
    case Type::kErase:
      reply(conn, req.seq, Type::kInt, kv_.erase(req.strs[0]) > 0 ? 1 : 0);
      return Status::Ok();
    default:
      return Status::Protocol("unexpected {} frame", wire::type_name(req.type));
  }
}

Status StoreState::handle_wait(uint64_t conn, Frame& req) {
  WaitId id{conn, req.seq};
  if (waiters_.count(id) != 0) return Status::Protocol("wait seq {} is already pending", req.seq);
  Waiter w{std::move(req.strs), 0};
  std::sort(w.keys.begin(), w.keys.end());
  w.keys.erase(std::unique(w.keys.begin(), w.keys.end()), w.keys.end());
  for (const auto& k : w.keys) {
    if (kv_.count(k) != 0) continue;
    ++w.missing;
    waiting_on_[k].push_back(id);
  }
  if (w.missing == 0) reply(conn, req.seq, Type::kOk);
  else waiters_.emplace(id, std::move(w));
  return Status::Ok();
}

// The wait is answered before the cancel, so the client reads the outcome first: kOk when
// the keys appeared in the meantime, else kMissing with the keys that still do not exist.
void StoreState::handle_cancel(uint64_t conn, const Frame& req) {
  WaitId id{conn, static_cast<uint32_t>(req.num)};
  auto it = waiters_.find(id);
  if (it != waiters_.end()) {
    std::vector<std::string> missing;
    for (const auto& k : it->second.keys)
      if (kv_.count(k) == 0) missing.push_back(k);
    remove_waiter(id);
    if (missing.empty()) reply(conn, id.second, Type::kOk);
    else reply(conn, id.second, Type::kMissing, 0, std::move(missing));
  }
  reply(conn, req.seq, Type::kOk);
}

void StoreState::handle_add(uint64_t conn, const Frame& req) {
  const std::string& key = req.strs[0];
  auto it = kv_.find(key);
  int64_t value = 0;
  if (it != kv_.end()) {
    const std::string& text = it->second;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size())
      return reply(conn, req.seq, Type::kError, static_cast<int64_t>(Code::kInvalidArgument),
                   {fmt::format("value \"{}\" is not an integer", wire::printable(text))});
  }
  if (__builtin_add_overflow(value, req.num, &value))
    return reply(conn, req.seq, Type::kError, static_cast<int64_t>(Code::kInvalidArgument),
                 {fmt::format("adding {} to {} overflows", req.num, it == kv_.end() ? "0" : it->second)});
  bool created = it == kv_.end();
  kv_[key] = std::to_string(value);
  reply(conn, req.seq, Type::kInt, value);
  if (created) key_created(key);
}

void StoreState::handle_compare_set(uint64_t conn, const Frame& req) {
  const std::string& key = req.strs[0];
  bool expect_present = req.num == 1;
  auto it = kv_.find(key);
  if (it == kv_.end()) {
    if (expect_present) return reply(conn, req.seq, Type::kNotFound);
    kv_.emplace(key, req.strs[2]);
    reply(conn, req.seq, Type::kValue, 0, {req.strs[2]});
    return key_created(key);
  }
  if (expect_present && it->second == req.strs[1]) it->second = req.strs[2];
  reply(conn, req.seq, Type::kValue, 0, {it->second});
}

// A key counts once per waiter: one erased and set again does not count twice.
void StoreState::key_created(const std::string& key) {
  auto node = waiting_on_.extract(key);
  if (node.empty()) return;
  for (const WaitId& id : node.mapped()) {
    auto it = waiters_.find(id);
    if (it == waiters_.end() || --it->second.missing != 0) continue;
    waiters_.erase(it);
    reply(id.first, id.second, Type::kOk);
  }
}

void StoreState::remove_waiter(const WaitId& id) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return;
  for (const auto& k : it->second.keys) {
    auto list = waiting_on_.find(k);
    if (list == waiting_on_.end()) continue;
    std::erase(list->second, id);
    if (list->second.empty()) waiting_on_.erase(list);
  }
  waiters_.erase(it);
}

void StoreState::drop_connection(uint64_t conn) {
  std::vector<WaitId> ids;
  for (auto it = waiters_.lower_bound({conn, 0}); it != waiters_.end() && it->first.first == conn; ++it)
    ids.push_back(it->first);
  for (const WaitId& id : ids) remove_waiter(id);
}

}  // namespace podnet::bootstrap
