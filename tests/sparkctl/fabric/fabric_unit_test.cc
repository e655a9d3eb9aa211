// Unit tests of the fabric commands' logic on FakeTransport: snapshot parsing, planning (what
// differs, the management guard, idempotence), the rollback script, and verify's cable naming.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "sparkctl/fabric/apply.h"
#include "sparkctl/fabric/fabric_plan.h"
#include "sparkctl/fabric/node_state.h"
#include "sparkctl/fabric/fabric_verify.h"
#include "sparkctl/ssh/testing/fake_transport.h"

namespace spark::fabric {
namespace {

using nlohmann::json;
using ssh::testing::FakeTransport;

constexpr const char* kFabric[] = {"enp1s0f0np0", "enP2p1s0f0np0", "enp1s0f1np1", "enP2p1s0f1np1"};

netplan::ClusterSpec Ring(int n) {
  netplan::ClusterSpec spec;
  spec.name = "t";
  for (int r = 0; r < n; ++r) {
    netplan::NodeSpec node{"spark-" + std::to_string(r), "198.19.0." + std::to_string(10 + r), "", r,
                           {}};
    node.ports = {{"p0", netplan::PortPeer{"spark-" + std::to_string((r + 1) % n), "p1"}},
                  {"p1", netplan::PortPeer{"spark-" + std::to_string((r + n - 1) % n), "p0"}}};
    spec.nodes.push_back(node);
  }
  spec.fabric.kind = netplan::TopologyKind::kRing;
  return spec;
}

std::string Key(int rank, bool pub) {
  return std::string(42, 'k') + static_cast<char>('A' + 2 * rank + (pub ? 1 : 0)) + "=";
}

json Link(const std::string& name, int mtu, const std::string& mac,
          const std::vector<std::string>& addrs) {
  json info = json::array();
  for (const auto& a : addrs) {
    auto slash = a.find('/');
    info.push_back({{"family", "inet"}, {"local", a.substr(0, slash)},
                    {"prefixlen", std::stoi(a.substr(slash + 1))}});
  }
  return {{"ifname", name}, {"flags", {"BROADCAST", "UP", "LOWER_UP"}}, {"mtu", mtu},
          {"operstate", "UP"}, {"address", mac}, {"addr_info", info}};
}

std::string Snapshot(const json& addr, const std::string& mgmt, int rank,
                     const std::string& gids = "") {
  return "@@sparkctl addr\n" + addr.dump() + "\n@@sparkctl route\n[]\n@@sparkctl sysctl\n" +
         "net.ipv4.ip_forward = 0\n@@sparkctl ssh\n198.19.0.1 4000 " + mgmt + " 22\n" +
         "@@sparkctl wgkey\n" + Key(rank, false) + "\n" + Key(rank, true) +
         "\n@@sparkctl files\n@@sparkctl gids\n" + gids + "@@sparkctl saved\n";
}

// A "gids" section: per device the link-local RoCE v1/v2 entries at 0 and 1, then, when the
// device's netdev has an address, its IPv4-mapped v1/v2 entries at `v4_index` and v4_index+1.
std::string Gids(const std::vector<std::string>& devices, std::optional<int> v4_index) {
  std::string out;
  for (const std::string& d : devices) {
    out += d + " 0 fe80:0000:0000:0000:0000:00ff:fe00:0001 IB/RoCE v1\n";
    out += d + " 1 fe80:0000:0000:0000:0000:00ff:fe00:0001 RoCE v2\n";
    if (v4_index) {
      out += d + " " + std::to_string(*v4_index) +
             " 0000:0000:0000:0000:0000:ffff:c612:0001 IB/RoCE v1\n";
      out += d + " " + std::to_string(*v4_index + 1) +
             " 0000:0000:0000:0000:0000:ffff:c612:0001 RoCE v2\n";
    }
  }
  return out;
}

std::vector<std::string> Devices(const NodeChanges& n) {
  std::vector<std::string> out;
  for (const auto& fi : n.plan.addressing.interfaces) out.push_back(fi.rdma_device);
  return out;
}

// What a node shows before sparkctl touched it (with a WireGuard key already made).
std::string FreshSnapshot(int rank) {
  json addr = json::array();
  std::string mgmt = "198.19.0." + std::to_string(10 + rank);
  addr.push_back(Link("enP7s7", 1500, "02:00:00:00:00:0" + std::to_string(rank), {mgmt + "/24"}));
  for (int i = 0; i < 4; ++i)
    addr.push_back(Link(kFabric[i], 1500, "02:00:00:00:0" + std::to_string(rank) + ":0" +
                                               std::to_string(i), {}));
  return Snapshot(addr, mgmt, rank);
}

// What a node shows once `changes` is applied; its RoCE v2 IPv4 GID is at index `gid_v4`.
std::string AppliedSnapshot(const NodeChanges& n, int rank, int gid_v4 = 5) {
  json addr = json::array();
  std::string mgmt = "198.19.0." + std::to_string(10 + rank);
  addr.push_back(Link("enP7s7", 1500, "m", {mgmt + "/24"}));
  for (const auto& fi : n.plan.addressing.interfaces)
    addr.push_back(Link(fi.netdev, n.plan.mtu, "x", {fi.address.ToString()}));
  addr.push_back(Link(n.plan.wireguard->interface, 1420, "", {n.plan.wireguard->address.ToString()}));
  json routes = json::array();
  for (const auto& r : n.plan.addressing.routes)
    routes.push_back({{"dst", r.to.ToString()}, {"gateway", r.via.ToString()}, {"dev", r.dev},
                      {"metric", r.metric}});
  std::string sysctls, files;
  for (const auto& s : n.plan.sysctls) sysctls += s.key + " = " + s.value + "\n";
  for (const auto& f : netplan::NodeFiles(n.plan)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%o", f.mode);
    files += std::string(mode) + " " + Sha256Hex(f.content) + "  " + f.path + "\n";
  }
  return "@@sparkctl addr\n" + addr.dump() + "\n@@sparkctl route\n" + routes.dump() +
         "\n@@sparkctl sysctl\n" + sysctls + "@@sparkctl ssh\n198.19.0.1 4000 " + mgmt + " 22\n" +
         "@@sparkctl wgkey\n" + Key(rank, false) + "\n" + Key(rank, true) + "\n@@sparkctl files\n" +
         files + "@@sparkctl gids\n" + Gids(Devices(n), gid_v4 - 1) + "@@sparkctl saved\nyes\n";
}

void ReplyFresh(FakeTransport& fake, int n) {
  for (int r = 0; r < n; ++r)
    fake.Reply("spark-" + std::to_string(r), "export LC_ALL=C.*", FreshSnapshot(r));
}

TEST(NodeStateTest, ParsesSectionsIntoNodeState) {
  auto s = ParseSnapshot(FreshSnapshot(2));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->netdevs.size(), 5u);
  EXPECT_EQ(s->NetdevWithAddress("198.19.0.12"), "enP7s7");
  EXPECT_EQ(s->ssh_server_address, "198.19.0.12");
  EXPECT_EQ(s->sysctls.at("net.ipv4.ip_forward"), "0");
  EXPECT_EQ(s->wg_public_key, Key(2, true));
  netplan::NodeState state = ToNodeState(*s, {"enp1s0f0np0"});
  ASSERT_EQ(state.links.size(), 1u);  // the management netdev is out of scope
  EXPECT_EQ(state.links[0].mtu, 1500);
  EXPECT_FALSE(ParseSnapshot("@@sparkctl addr\nnot json\n").ok());
}

TEST(PlanChangesTest, FreshRingNeedsAddressesRoutesFilesAndWireGuard) {
  FakeTransport fake({"spark-0", "spark-1", "spark-2", "spark-3"});
  ReplyFresh(fake, 4);
  auto c = PlanChanges(fake, Ring(4), {});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const NodeChanges& n0 = c->nodes[0];
  EXPECT_EQ(n0.management_interface, "enP7s7");
  EXPECT_TRUE(n0.wireguard);
  EXPECT_EQ(n0.files.size(), 3u);  // netplan, sysctl.d, wireguard
  bool route = false, addr = false;
  for (const auto& ch : n0.runtime) {
    route |= ch.description == "add route 198.18.2.0/24 via 198.18.0.2 dev enp1s0f0np0 metric 100";
    addr |= ch.description == "enp1s0f0np0: add 198.18.0.1/24";
    EXPECT_EQ(ch.description.find("enP7s7"), std::string::npos) << ch.description;
  }
  EXPECT_TRUE(route);
  EXPECT_TRUE(addr);
  // WireGuard peers are reached over the management LAN, which no fabric cable can cut.
  EXPECT_EQ(n0.plan.wireguard->peers[0].endpoint, "198.19.0.11:51871");
  // No fabric address yet, so no RoCE v2 IPv4 GID: apply reads the index later.
  EXPECT_TRUE(n0.gid_pending);
  EXPECT_EQ(n0.plan.Env("NCCL_IB_GID_INDEX"), "");
  EXPECT_NE(c->notes[0].find("NCCL_IB_GID_INDEX of spark-0, spark-1, spark-2, spark-3 is read by "
                             "apply"),
            std::string::npos)
      << c->notes[0];
  // Planning changes nothing: only the read-only snapshot command ran.
  for (const auto& call : fake.calls()) EXPECT_TRUE(call.command.starts_with("export LC_ALL=C"));
}

TEST(PlanChangesTest, AppliedClusterHasNoChanges) {
  FakeTransport fake({"spark-0", "spark-1", "spark-2", "spark-3"});
  ReplyFresh(fake, 4);
  auto c = PlanChanges(fake, Ring(4), {});
  ASSERT_TRUE(c.ok());
  for (int r = 0; r < 4; ++r)
    fake.Reply("spark-" + std::to_string(r), "export LC_ALL=C.*", AppliedSnapshot(c->nodes[r], r));
  auto again = PlanChanges(fake, Ring(4), {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  for (const auto& n : again->nodes) {
    for (const auto& ch : n.runtime) ADD_FAILURE() << n.node << ": " << ch.description;
    for (const auto& f : n.files) ADD_FAILURE() << n.node << ": " << f.file.path << " " << f.why;
    EXPECT_FALSE(n.wireguard) << n.wireguard_why;
  }
  EXPECT_EQ(again->Count(), 0u);
  // The GID index comes from each node's table (5 here, not the usual 3).
  for (const auto& n : again->nodes) {
    EXPECT_FALSE(n.gid_pending);
    EXPECT_EQ(n.plan.Env("NCCL_IB_GID_INDEX"), "5") << n.node;
    EXPECT_EQ(again->fabric.FindNode(n.node)->Env("NCCL_IB_GID_INDEX"), "5") << n.node;
  }
  EXPECT_TRUE(again->notes.empty());
}

TEST(PlanChangesTest, GidIndexIsReadPerNode) {
  FakeTransport fake({"spark-0", "spark-1", "spark-2"});
  ReplyFresh(fake, 3);
  auto c = PlanChanges(fake, Ring(3), {});
  ASSERT_TRUE(c.ok());
  for (int r = 0; r < 3; ++r)
    fake.Reply("spark-" + std::to_string(r), "export LC_ALL=C.*",
               AppliedSnapshot(c->nodes[r], r, r == 1 ? 7 : 3));
  auto again = PlanChanges(fake, Ring(3), {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->nodes[0].plan.Env("NCCL_IB_GID_INDEX"), "3");
  EXPECT_EQ(again->nodes[1].plan.Env("NCCL_IB_GID_INDEX"), "7");
  // NCCL_IB_GID_INDEX stays where the netplan library puts it: right after NCCL_IB_HCA.
  const auto& env = again->nodes[1].plan.nccl_env;
  for (size_t i = 0; i + 1 < env.size(); ++i) {
    if (env[i].name == "NCCL_IB_HCA") {
      EXPECT_EQ(env[i + 1].name, "NCCL_IB_GID_INDEX");
    }
  }
}

// A fabric netdev with an address but no RoCE v2 IPv4 GID: the plan cannot give NCCL an index,
// and says which node and device to look at, with preflight's hint.
TEST(PlanChangesTest, AddressWithoutRoceGidNamesTheNode) {
  FakeTransport fake({"spark-0", "spark-1", "spark-2"});
  ReplyFresh(fake, 3);
  auto c = PlanChanges(fake, Ring(3), {});
  ASSERT_TRUE(c.ok());
  for (int r = 0; r < 3; ++r)
    fake.Reply("spark-" + std::to_string(r), "export LC_ALL=C.*", AppliedSnapshot(c->nodes[r], r));
  std::string broken = AppliedSnapshot(c->nodes[2], 2);
  const size_t from = broken.find("@@sparkctl gids\n") + 16;
  broken.replace(from, broken.find("@@sparkctl saved") - from,
                 Gids(Devices(c->nodes[2]), std::nullopt));  // link-local entries only
  fake.Reply("spark-2", "export LC_ALL=C.*", broken);
  auto again = PlanChanges(fake, Ring(3), {});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  const std::string& m = again.status().message();
  EXPECT_NE(m.find("spark-2: no RoCE v2 IPv4 GID on " + Devices(c->nodes[2])[0]), std::string::npos)
      << m;
  EXPECT_NE(m.find("check the RDMA driver (show_gids)"), std::string::npos) << m;
}

TEST(FindGidIndexTest, DevicesThatDisagreeGiveTheFirstAndANote) {
  netplan::NodeAddressing planned;
  planned.interfaces = {{0, 0, "enp1s0f0np0", "rocep1s0f0", {}, 0, {}},
                        {0, 1, "enP2p1s0f0np0", "roceP2p1s0f0", {}, 0, {}}};
  NodeSnapshot s =
      *ParseSnapshot("@@sparkctl gids\n" + Gids({"rocep1s0f0"}, 2) + Gids({"roceP2p1s0f0"}, 4));
  std::string note;
  auto gid = FindGidIndex("spark-0", s.rdma, planned, {"enp1s0f0np0", "enP2p1s0f0np0"}, &note);
  ASSERT_TRUE(gid.ok()) << gid.status().ToString();
  EXPECT_EQ(*gid, std::optional<int>(3));
  EXPECT_NE(note.find("rocep1s0f0=3, roceP2p1s0f0=5"), std::string::npos) << note;
  // Nothing addressed yet: unknown, not an error.
  auto pending = FindGidIndex("spark-0", s.rdma, planned, {}, &note);
  ASSERT_TRUE(pending.ok());
  EXPECT_FALSE(pending->has_value());
}

// Apply reads the index in its own round trip once the addresses exist, and puts it into the
// plan; without the entry it fails naming the node.
TEST(ApplyNodeTest, ReadsTheGidIndexAfterAssigningAddresses) {
  FakeTransport fake({"spark-0", "spark-1", "spark-2"});
  ReplyFresh(fake, 3);
  auto c = PlanChanges(fake, Ring(3), {});
  ASSERT_TRUE(c.ok());
  NodeChanges n = c->nodes[0];
  ASSERT_TRUE(n.gid_pending);
  fake.Reply("spark-0", "/bin/sh -s", "@@sparkctl gids\n" + Gids(Devices(n), 8));
  int gid = -1;
  ASSERT_TRUE(ApplyNode(fake, n, &gid).ok());
  EXPECT_EQ(gid, 9);
  SetGidIndex(&n, gid);
  EXPECT_EQ(n.plan.Env("NCCL_IB_GID_INDEX"), "9");
  EXPECT_FALSE(n.gid_pending);
  fake.Reply("spark-0", "/bin/sh -s", "@@sparkctl gids\n" + Gids(Devices(n), std::nullopt));
  Status s = ApplyNode(fake, c->nodes[0], &gid);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("spark-0: no RoCE v2 IPv4 GID"), std::string::npos) << s.message();
}

TEST(PlanChangesTest, RefusesWhenManagementIsOnAFabricNetdev) {
  FakeTransport fake({"spark-0", "spark-1", "spark-2"});
  ReplyFresh(fake, 3);
  json addr = json::array({Link("enp1s0f0np0", 1500, "a", {"198.19.9.9/24"}),
                           Link("enP2p1s0f0np0", 1500, "b", {}), Link("enp1s0f1np1", 1500, "c", {}),
                           Link("enP2p1s0f1np1", 1500, "d", {})});
  fake.Reply("spark-1", "export LC_ALL=C.*", Snapshot(addr, "198.19.9.9", 1));
  auto c = PlanChanges(fake, Ring(3), {});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(c.status().message().find("spark-1: the management address 198.19.9.9 is on fabric "
                                      "netdev enp1s0f0np0"),
            std::string::npos)
      << c.status().message();
}

TEST(PlanChangesTest, UndiscoveredInventoryAsksForDiscover) {
  FakeTransport fake;
  netplan::ClusterSpec spec = Ring(3);
  spec.fabric.kind.reset();
  auto c = PlanChanges(fake, spec, {});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("sparkctl discover"), std::string::npos);
  EXPECT_TRUE(fake.calls().empty());
}

TEST(RollbackScriptTest, UndoesWhatApplyAdds) {
  FakeTransport fake({"spark-0", "spark-1", "spark-2", "spark-3"});
  ReplyFresh(fake, 4);
  auto c = PlanChanges(fake, Ring(4), {});
  ASSERT_TRUE(c.ok());
  std::string s = RollbackScript(c->nodes[0]);
  for (const char* want : {"ip addr del 198.18.0.1/24 dev enp1s0f0np0",
                           "ip route del 198.18.2.0/24 via 198.18.0.2 dev enp1s0f0np0 metric 100",
                           "ip link set dev enp1s0f0np0 mtu 1500", "sysctl -w net.ipv4.ip_forward=0",
                           "ip link del dev sparkctl-wg0", "rm -f /etc/netplan/60-sparkctl-fabric.yaml"})
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
  EXPECT_EQ(s.find("enP7s7"), std::string::npos);
}

TEST(VerifyTest, NamesTheCableOfADeadLink) {
  FakeTransport fake({"spark-0", "spark-1", "spark-2", "spark-3"});
  ReplyFresh(fake, 4);
  auto c = PlanChanges(fake, Ring(4), {});
  ASSERT_TRUE(c.ok());
  fake.Reply("*", "/bin/sh -s",
             "df:enp1s0f0np0 198.18.0.2 fail\nreach 198.18.0.2 fail\n"
             "link enp1s0f0np0 down\nlink enp1s0f1np1 up\n@@neigh\n[]\n");
  auto v = VerifyCluster(fake, *c);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_FALSE(v->ok());
  ASSERT_FALSE(v->suspect_cables.empty());
  EXPECT_EQ(v->suspect_cables[0],
            "cable 0: spark-0 p0 twin a (enp1s0f0np0) <-> spark-1 p1 twin a (enp1s0f1np1)");
  EXPECT_NE(v->Summary().find("FAIL spark-0 link enp1s0f0np0: no carrier"), std::string::npos)
      << v->Summary();
}

}  // namespace
}  // namespace spark::fabric
