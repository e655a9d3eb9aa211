#include "sparkctl/inventory/cluster_yaml.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace spark::inventory {
namespace {

// A discovered 3-node ring. Line numbers in the expectations refer to this text.
constexpr char kRing[] = R"(schema: sparkctl-cluster/v1
name: lab
ssh:
  user: root
nodes:
  - name: a
    address: 198.19.0.10
    machine_id: 0123456789abcdef0123456789abcdef
    rank: 0
    ports:
      - name: p0
        peer: {node: b, port: p1}
      - name: p1
        peer: {node: c, port: p0}
  - name: b
    address: 198.19.0.11
    rank: 1
    ports:
      - name: p0
        peer: {node: c, port: p1}
      - name: p1
        peer: {node: a, port: p0}
  - name: c
    address: 198.19.0.12
    rank: 2
    ports:
      - name: p0
        peer: {node: a, port: p1}
      - name: p1
        peer: {node: b, port: p0}
fabric:
  kind: ring
  cidr: 198.18.0.0/21
  mtu: 9000
control_plane:
  cidr: 198.19.255.0/29
  port: 51871
)";

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(ClusterYamlTest, RingLoads) {
  auto spec = ParseCluster(kRing, "c.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->nodes.size(), 3u);
  EXPECT_EQ(spec->nodes[1].ports[0].peer->node, "c");
  EXPECT_EQ(spec->fabric.kind, netplan::TopologyKind::kRing);
  EXPECT_EQ(spec->ssh.port, 22);
}

TEST(ClusterYamlTest, SeedWithOnlyHostsLoads) {
  auto spec = ParseCluster(
      "schema: sparkctl-cluster/v1\nname: demo\nnodes:\n  - {name: spark-0, address: 198.19.0.10}\n"
      "  - {name: spark-1, address: 198.19.0.11}\n",
      "seed.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_FALSE(spec->fabric.kind.has_value());
  EXPECT_TRUE(spec->nodes[0].ports.empty());
}

TEST(ClusterYamlTest, YamlRoundTrip) {
  auto spec = ParseCluster(kRing, "c.yaml");
  ASSERT_TRUE(spec.ok());
  std::string text = ToYaml(*spec);
  auto again = ParseCluster(text, "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << text;
  EXPECT_EQ(ToJson(*spec), ToJson(*again));
}

TEST(ClusterYamlTest, WriteIsAtomicAndReadable) {
  auto spec = ParseCluster(kRing, "c.yaml");
  ASSERT_TRUE(spec.ok());
  std::string path = testing::TempDir() + "/cluster-" + std::to_string(getpid()) + ".yaml";
  ASSERT_TRUE(WriteClusterFile(*spec, path).ok());
  auto loaded = LoadClusterFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->nodes[2].name, "c");
  std::remove(path.c_str());
}

TEST(ClusterYamlTest, MissingFileSaysHowToCreateOne) {
  auto spec = LoadClusterFile("/nonexistent/cluster.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), StatusCode::kNotFound);
  EXPECT_NE(spec.status().message().find("sparkctl discover"), std::string::npos);
}

struct BadCase {
  const char* name;
  std::string text;
  std::string expected;
};

std::vector<BadCase> BadCases() {
  const std::string g = kRing;
  return {
      {"UnknownKey", Replace(g, "  user: root\n", "  user: root\n  identity: /k\n"),
       "c.yaml:5:3: ssh.identity: unknown key (did you mean 'identity_file'?)"},
      {"MissingAddress", Replace(g, "    address: 198.19.0.11\n", ""),
       "c.yaml:15:5: nodes[1].address: missing required key"},
      {"BadAddress", Replace(g, "198.19.0.11", "198.19.0.300"),
       "c.yaml:16:5: nodes[1].address: '198.19.0.300' is neither an IPv4 address nor a host name"},
      {"DuplicateName", Replace(g, "  - name: c\n", "  - name: b\n"),
       "c.yaml:23:5: nodes[2].name: duplicate node name (also nodes[1])"},
      {"DuplicateMachineId", Replace(g, "    address: 198.19.0.11\n",
                                     "    address: 198.19.0.11\n    machine_id: 0123456789abcdef0123456789abcdef\n"),
       "c.yaml:17:5: nodes[1].machine_id: same machine-id as a"},
      {"PeerUnknownNode", Replace(g, "peer: {node: c, port: p1}", "peer: {node: d, port: p1}"),
       "c.yaml:20:16: nodes[1].ports[0].peer.node: no node named 'd'"},
      {"AsymmetricCable", Replace(g, "        peer: {node: c, port: p1}\n", "        peer: {node: c, port: p0}\n"),
       "c.yaml:20:9: nodes[1].ports[0].peer: b p0 is cabled to c p0, but c p0 does not list b p0"},
      {"BadPortName", Replace(g, "      - name: p1\n        peer: {node: c, port: p0}", "      - name: p2\n        peer: {node: c, port: p0}"),
       "c.yaml:13:9: nodes[0].ports[1].name: 'p2' is not a port of a DGX Spark (p0 or p1)"},
      {"CidrTooSmall", Replace(g, "198.18.0.0/21", "198.18.0.0/24"),
       "c.yaml:33:3: fabric.cidr: 198.18.0.0/24 is too small for 3 nodes in a ring; use a /21 or larger"},
      {"CidrHostBits", Replace(g, "198.18.0.0/21", "198.18.0.1/21"),
       "c.yaml:33:3: fabric.cidr: '198.18.0.1/21' has host bits set; did you mean 198.18.0.0/21?"},
      {"MtuOutOfRange", Replace(g, "mtu: 9000", "mtu: 90000"), "c.yaml:34:3: fabric.mtu: 90000 is out of range"},
      {"KindVsNodeCount", Replace(g, "kind: ring", "kind: pair"),
       "c.yaml:32:3: fabric.kind: pair needs 2..2 nodes, the inventory has 3"},
      {"ControlPlaneTooSmall", Replace(g, "198.19.255.0/29", "198.19.255.0/31"),
       "c.yaml:36:3: control_plane.cidr: 198.19.255.0/31 holds 0 hosts"},
      {"ControlPlaneOverlapsFabric", Replace(g, "198.19.255.0/29", "198.18.0.0/29"),
       "c.yaml:36:3: control_plane.cidr: overlaps fabric.cidr"},
      {"RankOutOfRange", Replace(g, "    rank: 2\n", "    rank: 5\n"), "c.yaml:25:5: nodes[2].rank: 5 is out of range (0..2)"},
      {"PartialRanks", Replace(g, "    rank: 2\n", ""), "nodes: either every node has a rank or none does"},
      {"NodesNotAList", "schema: sparkctl-cluster/v1\nname: x\nnodes: a\n",
       "c.yaml:3:8: nodes: expected a list, found 'a'"},
      {"SshPortType", Replace(g, "  user: root\n", "  user: root\n  port: twenty-two\n"),
       "c.yaml:5:9: ssh.port: expected an integer, found 'twenty-two'"},
      {"BadKind", Replace(g, "kind: ring", "kind: mesh"), "c.yaml:32:3: fabric.kind: 'mesh' is not a topology"},
      {"WrongSchema", Replace(g, "sparkctl-cluster/v1", "sparkctl-profile/v1"),
       "c.yaml:1:1: schema: unsupported schema 'sparkctl-profile/v1'"},
  };
}

class ClusterBadCaseTest : public testing::TestWithParam<BadCase> {};

TEST_P(ClusterBadCaseTest, NamesKeyLineAndColumn) {
  const BadCase& c = GetParam();
  auto spec = ParseCluster(c.text, "c.yaml");
  ASSERT_FALSE(spec.ok()) << "expected an error containing: " << c.expected;
  EXPECT_NE(spec.status().message().find(c.expected), std::string::npos)
      << "got: " << spec.status().message() << "\nwanted: " << c.expected;
}

INSTANTIATE_TEST_SUITE_P(Malformed, ClusterBadCaseTest, testing::ValuesIn(BadCases()),
                         [](const testing::TestParamInfo<BadCase>& info) { return info.param.name; });

}  // namespace
}  // namespace spark::inventory
