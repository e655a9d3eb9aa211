// Golden files: the full bundle (netplan YAML, sysctl.d, WireGuard, NCCL env, apply and reset
// commands) of every node of a pair, 3/4/6/8-node rings, a 4-node line and a 4-node switched
// fabric, under tests/netplan/golden/<case>/<node>.txt. Regenerate after a reviewed change with
//   SPARK_UPDATE_GOLDEN=1 build-net/tests/netplan_render_test
// Every rendered netplan file is also fed to the real `netplan generate --root-dir`.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "netplan/render.h"
#include "tests/netplan/test_clusters.h"

namespace spark::netplan {
namespace {

namespace fs = std::filesystem;
using namespace ::spark::netplan::testing;  // NOLINT

struct GoldenCase {
  std::string name;
  ClusterSpec spec;
  PlanInputs inputs;
};

GoldenCase Make(std::string name, ClusterSpec spec) {
  PlanInputs inputs = MakeInputs(spec);
  if (*spec.fabric.kind == TopologyKind::kSwitched) inputs.nccl_ib_tc = 106;
  return {std::move(name), std::move(spec), std::move(inputs)};
}

void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.name; }

std::vector<GoldenCase> GoldenCases() {
  return {Make("pair", MakePair()),           Make("ring3", MakeRing(3)),
          Make("ring4", MakeRing(4)),         Make("ring6", MakeRing(6)),
          Make("ring8", MakeRing(8)),         Make("line4", MakeLine(4)),
          Make("switched4", MakeSwitched(4))};
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool UpdateMode() {
  const char* flag = std::getenv("SPARK_UPDATE_GOLDEN");
  return flag && std::string(flag) == "1";
}

void ExpectGolden(const fs::path& path, const std::string& actual) {
  if (UpdateMode()) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << actual;
    return;
  }
  ASSERT_TRUE(fs::exists(path)) << path << " missing; run with SPARK_UPDATE_GOLDEN=1 and review";
  EXPECT_EQ(ReadFile(path), actual) << "golden " << path << " differs; if the change is intended, "
                                    << "rerun with SPARK_UPDATE_GOLDEN=1 and review the diff";
}

std::string NetplanBinary() {
  for (const char* candidate : {"/usr/sbin/netplan", "/usr/bin/netplan"}) {
    if (fs::exists(candidate)) return candidate;
  }
  return "";
}

// Runs `netplan generate --root-dir` on the file; returns its exit status and output.
std::pair<int, std::string> NetplanGenerate(const std::string& binary, const std::string& yaml,
                                            const fs::path& root) {
  fs::create_directories(root / "etc/netplan");
  fs::path file = root / "etc/netplan/60-sparkctl-fabric.yaml";
  std::ofstream(file) << yaml;
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
  std::string command = binary + " generate --root-dir " + root.string() + " 2>&1";
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  char buffer[4096];
  while (size_t got = fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, got);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

int CountOf(const std::string& text, const std::string& word) {
  int count = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++count;
  return count;
}

class RenderGoldenTest : public ::testing::TestWithParam<GoldenCase> {
 protected:
  FabricPlan Plan() {
    auto plan = BuildFabricPlan(GetParam().spec, GetParam().inputs);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    return plan.ok() ? *plan : FabricPlan{};
  }
};

TEST_P(RenderGoldenTest, BundleMatchesGolden) {
  FabricPlan plan = Plan();
  ASSERT_EQ(plan.nodes.size(), GetParam().spec.nodes.size());
  fs::path dir = fs::path(SPARK_SOURCE_DIR) / "tests/netplan/golden" / GetParam().name;
  for (const NodePlan& node : plan.nodes) {
    ExpectGolden(dir / (node.addressing.name + ".txt"), RenderNodeBundle(node));
  }
}

TEST_P(RenderGoldenTest, NetplanGenerateAcceptsEveryFile) {
  std::string binary = NetplanBinary();
  if (binary.empty()) GTEST_SKIP() << "netplan is not installed (apt-get install netplan.io)";
  FabricPlan plan = Plan();
  fs::path base = fs::temp_directory_path() /
                  ("sparkctl-netplan-" + std::to_string(getpid()) + "-" + GetParam().name);
  for (const NodePlan& node : plan.nodes) {
    fs::path root = base / node.addressing.name;
    auto [rc, output] = NetplanGenerate(binary, RenderNetplanYaml(node), root);
    EXPECT_EQ(rc, 0) << node.addressing.name << ": netplan generate failed:\n" << output;
    // networkd got one .network per fabric netdev with our MTU and one [Route] per route.
    for (const FabricInterface& fi : node.addressing.interfaces) {
      fs::path network = root / "run/systemd/network" / ("10-netplan-" + fi.netdev + ".network");
      ASSERT_TRUE(fs::exists(network)) << network;
      std::string text = ReadFile(network);
      EXPECT_NE(text.find("MTUBytes=" + std::to_string(node.mtu)), std::string::npos) << text;
      EXPECT_NE(text.find("Address=" + fi.address.ToString()), std::string::npos) << text;
      int routes = 0;
      for (const Route& r : node.addressing.routes) routes += r.dev == fi.netdev;
      EXPECT_EQ(CountOf(text, "[Route]"), routes) << text;
    }
    if (node.wireguard) {
      fs::path netdev = root / "run/systemd/network" /
                        ("10-netplan-" + node.wireguard->interface + ".netdev");
      ASSERT_TRUE(fs::exists(netdev)) << netdev;
      EXPECT_EQ(CountOf(ReadFile(netdev), "[WireGuardPeer]"),
                static_cast<int>(node.wireguard->peers.size()));
    }
  }
  std::error_code ignored;
  fs::remove_all(base, ignored);
}

INSTANTIATE_TEST_SUITE_P(Cases, RenderGoldenTest, ::testing::ValuesIn(GoldenCases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace spark::netplan
