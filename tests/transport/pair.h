// Two contexts in one process connected to each other: the fast way to run the transport
// conformance tests (ranks as threads). Forked multi-process tests live in tests/tools.
#pragma once

#include <gtest/gtest.h>
#include <podnet/podnet.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <memory>
#include <numeric>
#include <vector>

namespace podnet::testing {

inline constexpr auto kWait = std::chrono::seconds(20);

// Why a test of shm's single-copy paths cannot run in this process's configuration (another
// transport forced, or cross-memory attach off: then `without_cma` happens), or "".
inline std::string shm_cma_skip_reason(const char* without_cma) {
  const char* t = std::getenv("PODNET_TRANSPORT");
  if (t != nullptr && std::string(t) != "auto" && std::string(t) != "shm") return "this run is not over shm";
  if (const char* cma = std::getenv("PODNET_SHM_CMA"); cma != nullptr && std::string(cma) == "0")
    return std::string("cross-memory attach is off in this run (PODNET_SHM_CMA=0): ") + without_cma;
  return "";
}

struct Pair {
  std::unique_ptr<Context> a, b;
  std::shared_ptr<Endpoint> ab, ba;  // a's endpoint to b, b's endpoint to a

  static Pair make() {
    Pair p;
    ContextOptions o;
    o.bind_address = "127.0.0.1";
    o.rank = 0;
    auto a = Context::create(o);
    EXPECT_TRUE(a.ok()) << a.status().to_string();
    o.rank = 1;
    auto b = Context::create(o);
    EXPECT_TRUE(b.ok()) << b.status().to_string();
    p.a = std::move(a).value();
    p.b = std::move(b).value();
    auto ab = p.a->connect(p.b->address());
    EXPECT_TRUE(ab.ok()) << ab.status().to_string();
    auto ba = p.b->connect(p.a->address());
    EXPECT_TRUE(ba.ok()) << ba.status().to_string();
    p.ab = *ab;
    p.ba = *ba;
    // The suite runs once per transport (tests/transport/CMakeLists.txt): make sure the one
    // asked for is the one under test.
    const char* want = std::getenv("PODNET_TRANSPORT");
    std::string expect = want == nullptr || std::string(want) == "auto" ? "shm" : want;
    EXPECT_EQ(p.ab->transport(), expect);
    EXPECT_EQ(p.ba->transport(), expect);
    return p;
  }
};

inline std::vector<std::byte> pattern(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13; x ^= x >> 17; x ^= x << 5;
    b = static_cast<std::byte>(x);
  }
  return v;
}

}  // namespace podnet::testing
