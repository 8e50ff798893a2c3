// The address a context publishes for its peers (xfer/context_impl.h).
#include <gtest/gtest.h>

#include "xfer/context_impl.h"

namespace podnet::detail {
namespace {

TEST(PeerAddress, RoundTripsEveryFieldIncludingTheLinkSpeed) {
  PeerAddress a{0x1234, 3, "h0", "10.1.0.2:4000", "", "auto", "", 1000};
  std::string blob = format_address(a);
  EXPECT_NE(blob.find(";mbps=1000"), std::string::npos) << blob;
  auto b = parse_address(blob);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(b->id, 0x1234u);
  EXPECT_EQ(b->rank, 3);
  EXPECT_EQ(b->tcp, "10.1.0.2:4000");
  EXPECT_EQ(b->link_mbps, 1000);
}

TEST(PeerAddress, UnknownSpeedIsLeftOutAndReadsAsZero) {
  PeerAddress a{0x1234, 0, "h0", "127.0.0.1:4000", "", "auto", "", 0};
  std::string blob = format_address(a);
  EXPECT_EQ(blob.find("mbps"), std::string::npos) << blob;
  auto b = parse_address(blob);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->link_mbps, 0);
}

TEST(PeerAddress, BadLinkSpeedIsRefusedQuotingIt) {
  auto b = parse_address("podnet1;id=12;rank=0;host=h;tcp=127.0.0.1:1;mbps=fast");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("'fast'"), std::string::npos) << b.status().to_string();
  EXPECT_FALSE(parse_address("podnet1;id=12;rank=0;host=h;tcp=127.0.0.1:1;mbps=-5").ok());
}

// Oversubscription is judged from the exchanged addresses, so every rank agrees: one host id
// (the shm field) for all, and more ranks than CPUs.
TEST(PeerAddress, OneHostOversubscribedNeedsOneHostAndMoreRanksThanCpus) {
  auto addr = [](int rank, const std::string& shm) {
    return PeerAddress{0x10u + rank, rank, "h", "127.0.0.1:4000", shm, "auto", "", 0};
  };
  std::vector<PeerAddress> four;
  for (int r = 0; r < 4; ++r) four.push_back(addr(r, "boot-a," + std::to_string(100 + r) + ",sock" + std::to_string(r)));
  EXPECT_TRUE(one_host_oversubscribed(four, 2));
  EXPECT_FALSE(one_host_oversubscribed(four, 4)) << "as many CPUs as ranks";
  EXPECT_FALSE(one_host_oversubscribed(four, 16));
  auto two_hosts = four;
  two_hosts[3] = addr(3, "boot-b,103,sock3");
  EXPECT_FALSE(one_host_oversubscribed(two_hosts, 2)) << "ranks on another host";
  // Without shm in the addresses (PODNET_TRANSPORT=tcp) the host names decide.
  auto named = [](int rank, const std::string& host) {
    return PeerAddress{0x10u + rank, rank, host, "127.0.0.1:4000", "", "tcp", "", 0};
  };
  std::vector<PeerAddress> tcp_only{named(0, "vm"), named(1, "vm"), named(2, "vm")};
  EXPECT_TRUE(one_host_oversubscribed(tcp_only, 2));
  tcp_only[2] = named(2, "other");
  EXPECT_FALSE(one_host_oversubscribed(tcp_only, 2));
  auto mixed = four;
  mixed[1] = named(1, "h");
  EXPECT_TRUE(one_host_oversubscribed(mixed, 2)) << "one rank without shm: all compared by host name";
  EXPECT_FALSE(one_host_oversubscribed({four[0]}, 0)) << "one rank waits for nobody";
}

}  // namespace
}  // namespace podnet::detail
