// The store's data and pending waits, without sockets: the server's loop thread feeds it
// decoded requests and delivers the replies it emits (internal to src/bootstrap).
// Thread-safety: none; the one loop thread owns it.
#pragma once

#include <podnet/status.h>

#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bootstrap/store_wire.h"

namespace podnet::bootstrap {

class StoreState {
 public:
  // Delivers a reply to a connection. Called from handle(), possibly for another
  // connection than the request's (a set completes other clients' waits).
  using Send = std::function<void(uint64_t conn, wire::Frame reply)>;
  explicit StoreState(Send send) : send_(std::move(send)) {}

  // Handles a decoded request other than hello. Every request gets exactly one reply; a
  // wait's may come later. An error means the connection broke the protocol: close it.
  Status handle(uint64_t conn, wire::Frame& req);
  // Forgets a closed connection's pending waits.
  void drop_connection(uint64_t conn);

 private:
  struct Waiter {
    std::vector<std::string> keys;  // deduplicated
    size_t missing = 0;             // keys not created since the wait began
  };
  using WaitId = std::pair<uint64_t, uint32_t>;  // connection, seq of the wait request

  void reply(uint64_t conn, uint32_t seq, wire::Type type, int64_t num = 0, std::vector<std::string> strs = {});
  Status handle_wait(uint64_t conn, wire::Frame& req);
  void handle_cancel(uint64_t conn, const wire::Frame& req);
  void handle_add(uint64_t conn, const wire::Frame& req);
  void handle_compare_set(uint64_t conn, const wire::Frame& req);
  void key_created(const std::string& key);
  void remove_waiter(const WaitId& id);

  Send send_;
  std::unordered_map<std::string, std::string> kv_;
  std::map<WaitId, Waiter> waiters_;  // ordered: a connection's waits are one range
  std::unordered_map<std::string, std::vector<WaitId>> waiting_on_;  // absent key -> its waiters
};

}  // namespace podnet::bootstrap
