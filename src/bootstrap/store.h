// Rendezvous store: a small key/value server that the launcher or rank 0 embeds, and the
// client every rank uses to exchange addresses (like torch's TCPStore).
//
// Protocol: length-prefixed binary frames over TCP, validated field by field (see store_wire.h).
// Keys and values are byte strings. Blocking behaviour and timeouts are stated per call.
// Thread-safety: StoreServer is internally synchronised; a StoreClient may be used from one
// thread at a time (create one per thread if needed).
#pragma once

#include <podnet/status.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace podnet::bootstrap {

class StoreServer {
 public:
  // Listens on host:port (port 0 picks a free port) and serves from its own thread.
  static Result<std::unique_ptr<StoreServer>> start(const std::string& host, uint16_t port);
  virtual ~StoreServer() = default;
  virtual uint16_t port() const noexcept = 0;
  virtual std::string address() const = 0;  // "host:port"
  virtual void stop() = 0;                   // idempotent; the destructor calls it
};

class StoreClient {
 public:
  // Connects to "host:port", retrying with exponential backoff until `timeout` (the server
  // may start later than its clients). `timeout` also bounds every later request that has no
  // timeout of its own (set, get, add, ...), with a floor of 5 s: a frozen server is an error.
  static Result<std::unique_ptr<StoreClient>> connect(const std::string& address,
                                                      std::chrono::milliseconds timeout);
  virtual ~StoreClient() = default;

  virtual Status set(const std::string& key, const std::string& value) = 0;
  // Returns kUnavailable when the key does not exist (does not wait).
  virtual Result<std::string> get(const std::string& key) = 0;
  // Blocks until every key exists or `timeout` passes (kTimeout naming the missing keys).
  virtual Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // Waits for the key, then returns its value.
  virtual Result<std::string> wait_get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Atomically adds `delta` to the integer stored at key (missing = 0); returns the new value.
  virtual Result<int64_t> add(const std::string& key, int64_t delta) = 0;
  // Sets key to `desired` if its value equals `expected` (nullopt: the key must not exist).
  // Returns the value after the operation (kUnavailable when `expected` was given and the key
  // does not exist).
  virtual Result<std::string> compare_set(const std::string& key,
                                          const std::optional<std::string>& expected,
                                          const std::string& desired) = 0;
  // Returns whether the key existed.
  virtual Result<bool> erase(const std::string& key) = 0;
  // Blocks until `world_size` callers have entered barrier `name` (kTimeout says how many
  // arrived). Reusable: each call with the same name is a new generation.
  virtual Status barrier(const std::string& name, int world_size, std::chrono::milliseconds timeout) = 0;
};

}  // namespace podnet::bootstrap
