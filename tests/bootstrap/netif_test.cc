#include "bootstrap/netif.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

namespace podnet::bootstrap {
namespace {

const std::vector<NetIf> kIfs = {
    {"lo", "127.0.0.1", true, true},
    {"docker0", "127.0.1.1", false, true},
    {"eth0", "127.0.2.1", false, false},  // down
    {"eth1", "127.0.3.1", false, true},
    {"ib0", "127.0.4.1", false, true},
};

std::string pick(const std::vector<NetIf>& ifs, const std::string& spec) {
  auto r = select_interface(ifs, spec);
  return r.ok() ? r->name + " " + r->ipv4 : "error: " + r.status().message();
}

TEST(NetIf, EmptySpecPicksFirstUpNonLoopback) {
  EXPECT_EQ(pick(kIfs, ""), "docker0 127.0.1.1");
  EXPECT_EQ(pick({{"lo", "127.0.0.1", true, true}, {"eth0", "127.0.2.1", false, false}}, ""), "lo 127.0.0.1");
}

TEST(NetIf, ExactName) {
  EXPECT_EQ(pick(kIfs, "ib0"), "ib0 127.0.4.1");
  EXPECT_EQ(pick(kIfs, "lo"), "lo 127.0.0.1");
  EXPECT_EQ(pick(kIfs, " eth1 "), "eth1 127.0.3.1");
}

TEST(NetIf, ExactNameDoesNotMatchPrefix) {
  auto r = select_interface(kIfs, "eth");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
}

TEST(NetIf, Prefix) {
  EXPECT_EQ(pick(kIfs, "^eth"), "eth1 127.0.3.1");  // eth0 is down
  EXPECT_EQ(pick(kIfs, "^i"), "ib0 127.0.4.1");
}

TEST(NetIf, Exclusion) {
  EXPECT_EQ(pick(kIfs, "!docker"), "eth1 127.0.3.1");  // skips lo (loopback), docker0, eth0 (down)
  EXPECT_EQ(pick({{"lo", "127.0.0.1", true, true}, {"docker0", "127.0.1.1", false, true}}, "!docker"),
            "lo 127.0.0.1");
}

TEST(NetIf, ListTriedInOrder) {
  EXPECT_EQ(pick(kIfs, "eth7,^ib,eth1"), "ib0 127.0.4.1");
  EXPECT_EQ(pick(kIfs, "eth0,eth1"), "eth1 127.0.3.1");
}

TEST(NetIf, ErrorListsInterfaces) {
  auto r = select_interface(kIfs, "eth0,^mlx");
  ASSERT_FALSE(r.ok());
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("\"eth0,^mlx\""), std::string::npos) << m;
  EXPECT_NE(m.find("eth0 is down"), std::string::npos) << m;
  EXPECT_NE(m.find("lo 127.0.0.1"), std::string::npos) << m;
  EXPECT_NE(m.find("eth1 127.0.3.1"), std::string::npos) << m;
  EXPECT_NE(m.find("ib0 127.0.4.1"), std::string::npos) << m;
}

TEST(NetIf, MalformedSpecs) {
  for (std::string spec : {"^", "!", "eth0,,eth1", ","}) {
    auto r = select_interface(kIfs, spec);
    ASSERT_FALSE(r.ok()) << spec;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << spec;
  }
}

TEST(NetIf, NothingUp) {
  auto r = select_interface({{"eth0", "127.0.2.1", false, false}}, "");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("eth0 127.0.2.1 down"), std::string::npos) << r.status().message();
}

// PODNET_RAILS: several interfaces, in spec order, each once.
std::string pick_all(const std::vector<NetIf>& ifs, const std::string& spec, int max) {
  auto r = select_interfaces(ifs, spec, max);
  if (!r.ok()) return "error: " + r.status().message();
  std::string out;
  for (const NetIf& i : *r) out += (out.empty() ? "" : ",") + i.name;
  return out;
}

TEST(NetIf, SeveralRails) {
  const std::vector<NetIf> rails = {{"lo", "127.0.0.1", true, true},   {"eth0", "10.199.0.1", false, true},
                                    {"eth1", "10.199.1.1", false, true}, {"eth2", "10.199.2.1", false, false},
                                    {"eth1", "10.199.9.1", false, true},  // a second address: still one rail
                                    {"ib0", "10.0.0.1", false, true}};
  EXPECT_EQ(pick_all(rails, "^eth", 0), "eth0,eth1");  // eth2 is down
  EXPECT_EQ(pick_all(rails, "^eth", 1), "eth0");        // what select_interface() picks
  EXPECT_EQ(pick_all(rails, "^eth", 5), "eth0,eth1");
  EXPECT_EQ(pick_all(rails, "ib0,^eth", 2), "ib0,eth0");  // spec order
  EXPECT_EQ(pick_all(rails, "eth1,eth0", 0), "eth1,eth0");
  EXPECT_EQ(pick_all(rails, "", 0), "eth0,eth1,ib0");  // every up non-loopback interface
  EXPECT_EQ(pick_all(rails, "!eth", 0), "ib0,lo");     // non-loopback first
  EXPECT_EQ(pick_all({{"lo", "127.0.0.1", true, true}}, "", 0), "lo");
  EXPECT_NE(pick_all(rails, "^mlx", 0).find("error: no up IPv4 interface"), std::string::npos);
  auto first = select_interfaces(rails, "^eth", 0);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->at(1).ipv4, "10.199.1.1");  // the first address of a repeated name
}

TEST(NetIf, ListInterfacesFindsLoopback) {
  auto r = list_interfaces();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  bool found = false;
  for (const NetIf& i : *r) found |= i.loopback && i.ipv4 == "127.0.0.1";
  EXPECT_TRUE(found) << "no loopback interface with 127.0.0.1";
}

// PODNET_TCP_STREAMS=0: one stream when every rail is a link of known speed up to 10 Gbit/s
// or loopback; faster or unreported links keep several.
TEST(NetIf, AutoStreamsOnePerSlowLinkElseFour) {
  auto rail = [](const char* name, bool loopback, int mbps) { return NetIf{name, "10.0.0.1", loopback, true, mbps}; };
  EXPECT_EQ(auto_tcp_streams({rail("eth0", false, 1000)}), 1);
  EXPECT_EQ(auto_tcp_streams({rail("eth0", false, 10000), rail("eth1", false, 1000)}), 1);
  EXPECT_EQ(auto_tcp_streams({rail("eth0", false, 25000)}), 4);
  EXPECT_EQ(auto_tcp_streams({rail("eth0", false, -1)}), 4);  // virtio and the like report nothing
  EXPECT_EQ(auto_tcp_streams({rail("lo", true, -1)}), 1);  // loopback: one stream
  EXPECT_EQ(auto_tcp_streams({rail("lo", true, -1), rail("eth0", false, -1)}), 4);
  EXPECT_EQ(auto_tcp_streams({rail("eth0", false, 1000), rail("eth1", false, 100000)}), 4);
  EXPECT_EQ(auto_tcp_streams({}), 4);
}

// PODNET_TCP_EAGER_MAX=0 follows the same test: 256 KiB eager on slow links, else 64 KiB.
TEST(NetIf, AutoEagerLargerOnSlowLinks) {
  auto rail = [](const char* name, bool loopback, int mbps) { return NetIf{name, "10.0.0.1", loopback, true, mbps}; };
  EXPECT_EQ(auto_tcp_eager_max({rail("eth0", false, 1000)}), 256u << 10);
  EXPECT_EQ(auto_tcp_eager_max({rail("eth0", false, 25000)}), 64u << 10);
  EXPECT_EQ(auto_tcp_eager_max({rail("lo", true, -1)}), 64u << 10);
  EXPECT_EQ(auto_tcp_eager_max({}), 64u << 10);
}

// The speed a rank advertises to its peers: the fastest rail, 0 when any is unknown; it is
// slow by the same test as the rank's own defaults (a 1G + 25G rank is not slow either way).
TEST(NetIf, PublishedLinkSpeedIsTheFastestAndZeroWhenAnyIsUnknown) {
  auto rail = [](const char* name, bool loopback, int mbps) { return NetIf{name, "10.0.0.1", loopback, true, mbps}; };
  EXPECT_EQ(fastest_link_mbps({rail("eth0", false, 10000), rail("eth1", false, 1000)}), 10000);
  EXPECT_EQ(fastest_link_mbps({rail("eth0", false, 10000), rail("eth1", false, -1)}), 0);
  EXPECT_EQ(fastest_link_mbps({rail("lo", true, 1000)}), 0);
  EXPECT_EQ(fastest_link_mbps({}), 0);
  const std::vector<NetIf> mixed{rail("eth0", false, 1000), rail("eth1", false, 25000)};
  EXPECT_FALSE(slow_links(mixed));
  EXPECT_FALSE(is_slow_link(fastest_link_mbps(mixed)));
  EXPECT_TRUE(is_slow_link(fastest_link_mbps({rail("eth0", false, 1000), rail("eth1", false, 10000)})));
}

// list_interfaces() reads each speed the kernel reports (lo has none).
TEST(NetIf, LoopbackReportsNoSpeed) {
  auto ifs = list_interfaces();
  ASSERT_TRUE(ifs.ok()) << ifs.status().to_string();
  for (const NetIf& i : *ifs) {
    if (i.loopback) {
      EXPECT_EQ(i.speed_mbps, -1) << i.name;
    }
  }
}

}  // namespace
}  // namespace podnet::bootstrap

namespace podnet::bootstrap {
namespace {
// A fake sysfs: class/infiniband/<dev> links to devices/<parent>/infiniband/<dev>, as the
// kernel lays it out (rxe and siw under devices/virtual, a NIC under its PCI device).
struct FakeSysfs {
  std::filesystem::path root;
  FakeSysfs() {
    char tmpl[] = "/tmp/podnet-sysfs-XXXXXX";
    root = ::mkdtemp(tmpl);
    std::filesystem::create_directories(root / "class/infiniband");
  }
  ~FakeSysfs() { std::filesystem::remove_all(root); }
  void add(const std::string& dev, const std::string& parent) {
    auto target = root / "devices" / parent / "infiniband" / dev;
    std::filesystem::create_directories(target);
    std::filesystem::create_directory_symlink("../../devices/" + parent + "/infiniband/" + dev,
                                              root / "class/infiniband" / dev);
  }
  std::string cls() const { return (root / "class/infiniband").string(); }
};
}  // namespace

TEST(NetIf, SoftwareRdmaDevicesOnlyWhenEveryDeviceIsSoftware) {
  FakeSysfs s;
  EXPECT_TRUE(software_rdma_devices(s.cls()).empty()) << "no device";
  EXPECT_TRUE(software_rdma_devices(s.cls() + "/missing").empty()) << "no RDMA stack at all";
  s.add("rxe0", "virtual");
  s.add("siw1", "virtual");
  EXPECT_EQ(software_rdma_devices(s.cls()), (std::vector<std::string>{"rxe0", "siw1"}));
  s.add("mlx5_0", "pci0000:00/0000:00:02.0");
  EXPECT_TRUE(software_rdma_devices(s.cls()).empty()) << "a hardware device is there too";
}

}  // namespace podnet::bootstrap
