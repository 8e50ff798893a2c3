// A World is what a podnet program starts from: rank and size from the launcher, the
// rendezvous store, a transfer-engine context and an endpoint to every other rank.
//
// Store address: PODNET_STORE, else the launcher's (torchrun: MASTER_ADDR and MASTER_PORT+1,
// since torchrun's own store already listens on MASTER_PORT). When nobody hosts a store, rank
// 0 starts one at that address. Under Open MPI, Slurm or PMI with every rank on one host and
// no PODNET_STORE, the store is 127.0.0.1 with a port derived from the job id.
//
// Thread-safety: create() once per process; the members are thread-safe as documented on
// their own types.
#pragma once

#include <podnet/xfer.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/launch_env.h"
#include "bootstrap/store.h"

namespace podnet {

class World {
 public:
  struct Options {
    std::chrono::milliseconds timeout{0};  // 0: PODNET_STORE_TIMEOUT_MS
    bool connect_all = true;               // connect to every peer up front
    // Explicit membership (tests, embedding): when rank >= 0 and size > 0 the environment
    // is not consulted; `store` must then name a running store when size > 1.
    int rank = -1;
    int size = -1;
    std::string store;
    std::string bind_address;  // empty: PODNET_IFNAME selection
  };
  static Result<std::unique_ptr<World>> create(const Options& options);
  static Result<std::unique_ptr<World>> create() { return create(Options{}); }
  ~World();

  int rank() const { return info_.rank; }
  int size() const { return info_.world_size; }
  int local_rank() const { return info_.local_rank; }
  const std::string& launcher() const { return info_.launcher; }
  Context& context() { return *ctx_; }
  bootstrap::StoreClient& store() { return *store_; }
  // The endpoint to `peer` (connected on first use when connect_all was false).
  Result<std::shared_ptr<Endpoint>> peer(int rank);
  // All ranks meet; fails with the ranks still missing after the timeout.
  Status barrier(const std::string& name);
  std::chrono::milliseconds timeout() const { return timeout_; }
  // True when every rank's interfaces are links of known speed up to 10 Gbit/s (the same
  // answer on every rank: it comes from the exchanged addresses). Collectives then use the
  // built-in choices measured on such links.
  bool slow_links() const { return slow_links_; }
  // True when every rank is on this host and the ranks outnumber its online CPUs (the same
  // answer on every rank). Collectives then prefer algorithms with fewer dependent hops.
  bool oversubscribed() const { return oversubscribed_; }

 private:
  World() = default;
  bootstrap::LaunchInfo info_;
  std::chrono::milliseconds timeout_{0};
  std::unique_ptr<bootstrap::StoreServer> server_;
  std::unique_ptr<bootstrap::StoreClient> store_;
  std::unique_ptr<Context> ctx_;
  std::vector<std::string> addresses_;
  bool slow_links_ = false;
  bool oversubscribed_ = false;
  std::mutex peer_mu_;
  std::vector<std::shared_ptr<Endpoint>> peers_;
};

}  // namespace podnet
