// Ranks as threads: N Worlds in one process sharing a store, each with a Communicator.
// Fast enough to run the whole matrix of collectives x algorithms x types x ops x sizes.
#pragma once

#include <gtest/gtest.h>
#include <podnet/coll.h>

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "bootstrap/store.h"
#include "xfer/world.h"

namespace podnet::testing {

class Pod {
 public:
  explicit Pod(int n) : n_(n) {
    auto server = bootstrap::StoreServer::start("127.0.0.1", 0);
    EXPECT_TRUE(server.ok()) << server.status().to_string();
    server_ = std::move(server).value();
    worlds_.resize(n);
    comms_.resize(n);
    run([&](int r) {
      World::Options o;
      o.rank = r;
      o.size = n;
      o.store = server_->address();
      o.bind_address = "127.0.0.1";
      o.timeout = std::chrono::milliseconds(60000);
      auto w = World::create(o);
      ASSERT_TRUE(w.ok()) << w.status().to_string();
      worlds_[r] = std::move(w).value();
      auto c = Communicator::create(*worlds_[r]);
      ASSERT_TRUE(c.ok()) << c.status().to_string();
      comms_[r] = std::move(c).value();
    });
  }
  ~Pod() {
    comms_.clear();
    // Worlds leave together (their destructors meet in a barrier).
    std::vector<std::thread> ts;
    for (auto& w : worlds_) ts.emplace_back([&w] { w.reset(); });
    for (auto& t : ts) t.join();
  }
  int size() const { return n_; }
  Communicator& comm(int r) { return *comms_[r]; }
  World& world(int r) { return *worlds_[r]; }
  // Runs fn(rank) on every rank at once.
  void run(const std::function<void(int)>& fn) {
    std::vector<std::thread> ts;
    for (int r = 0; r < n_; ++r) ts.emplace_back([&fn, r] { fn(r); });
    for (auto& t : ts) t.join();
  }

 private:
  int n_;
  std::unique_ptr<bootstrap::StoreServer> server_;
  std::vector<std::unique_ptr<World>> worlds_;
  std::vector<std::unique_ptr<Communicator>> comms_;
};

}  // namespace podnet::testing
