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

}  // namespace
}  // namespace podnet::detail
