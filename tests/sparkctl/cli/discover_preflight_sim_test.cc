// discover + preflight against the simulator, through the real binary, real sshd and real veth
// links: topology and ring order, and every simulator fault caught by the right check.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/sparkctl/testing/shell.h"

namespace {

const std::string kSparkctl = SPARK_BINARY_DIR "/bin/sparkctl";

using spark::testing::Output;

Output Sh(const std::string& command) { return spark::testing::Shell(command); }

class SimCluster {
 public:
  SimCluster(std::string name, int nodes, std::string topology) : name_(std::move(name)) {
    Sh(kSparkctl + " sim destroy --name " + name_);
    created_ = Sh(kSparkctl + " sim create --name " + name_ + " --nodes " + std::to_string(nodes) +
                  " --topology " + topology).exit_code == 0;
  }
  ~SimCluster() { Sh(kSparkctl + " sim destroy --name " + name_); }
  bool created() const { return created_; }
  std::string seed() const { return "/run/sparkctl-sim/" + name_ + "/cluster.yaml"; }
  Output Fault(const std::string& args) { return Sh(kSparkctl + " sim fault --name " + name_ + " " + args); }

 private:
  std::string name_;
  bool created_ = false;
};

nlohmann::json Json(const Output& o) {
  try {
    return nlohmann::json::parse(o.out);
  } catch (const nlohmann::json::exception&) {
    ADD_FAILURE() << "not JSON: " << o.out.substr(0, 400);
    return {};
  }
}

// The verdict of check `id` on `node` in a preflight JSON result ("" when absent).
std::string Verdict(const nlohmann::json& result, const std::string& id, const std::string& node) {
  for (const auto& c : result.value("checks", nlohmann::json::array())) {
    if (c["id"] == id && c["node"] == node) return c["verdict"];
  }
  return "";
}

class DiscoverSimTest : public testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    ASSERT_EQ(access(kSparkctl.c_str(), X_OK), 0) << kSparkctl << " is missing: build it (a test binary without it is broken, not skipped)";
  }
};

struct TopologyCase {
  int nodes;
  const char* topology;
  const char* described;
};

TEST_F(DiscoverSimTest, FindsTopologyAndRingOrder) {
  for (TopologyCase c : {TopologyCase{2, "pair", "pair: spark-0, spark-1"},
                         TopologyCase{3, "ring", "ring: spark-0 -> spark-1 -> spark-2 -> spark-0"},
                         TopologyCase{4, "switched", "switched: spark-0, spark-1, spark-2, spark-3"}}) {
    SimCluster sim("disc" + std::to_string(c.nodes), c.nodes, c.topology);
    ASSERT_TRUE(sim.created()) << c.topology;
    Output o = Sh(kSparkctl + " discover -c " + sim.seed() + " --json");
    EXPECT_EQ(o.exit_code, 0) << o.out;
    nlohmann::json j = Json(o);
    EXPECT_EQ(j.value("topology", ""), c.described) << o.out;
    Output check = Sh(kSparkctl + " cluster check -c " + sim.seed());
    EXPECT_EQ(check.exit_code, 0) << check.out;
  }
}

TEST_F(DiscoverSimTest, EveryFaultIsCaughtByTheRightCheck) {
  SimCluster sim("pre4", 4, "ring");
  ASSERT_TRUE(sim.created());
  ASSERT_EQ(Sh(kSparkctl + " discover -c " + sim.seed() + " --json").exit_code, 0);
  const std::string preflight = kSparkctl + " preflight -c " + sim.seed() + " -p " SPARK_SOURCE_DIR
                                "/profiles/qwen3-tiny-demo.yaml --json";
  Output healthy = Sh(preflight);
  EXPECT_EQ(healthy.exit_code, 0) << healthy.out;

  struct Case {
    std::string fault, undo, check, node;
  };
  const Case cases[] = {
      {"kernel spark-1 7.0.0-1019-nvidia", "clear", "KERNEL.ALLOWED", "spark-1"},
      {"cma spark-2 0", "clear", "CMA.NONZERO", "spark-2"},
      {"memlock spark-3 64", "clear", "MEMLOCK.UNLIMITED", "spark-3"},
      {"machine-id spark-2 00000000000000000000000000000001", "clear", "MACHINE_ID.UNIQUE", "spark-2"},
      {"forward-drop spark-1", "clear", "FIREWALL.FORWARD", "spark-1"},
      {"unplug spark-1 0", "clear", "FABRIC.LINK_UP", "spark-1"},
      {"miscable", "clear", "FABRIC.CABLING", "spark-1"},
      {"sshd spark-3 stop", "clear", "SSH.REACHABLE", "spark-3"},
  };
  for (const Case& c : cases) {
    ASSERT_EQ(sim.Fault(c.fault).exit_code, 0) << c.fault;
    if (c.check == "MACHINE_ID.UNIQUE") sim.Fault("machine-id spark-0 00000000000000000000000000000001");
    Output o = Sh(preflight);
    EXPECT_EQ(o.exit_code, 2) << c.fault << "\n" << o.out.substr(0, 2000);
    EXPECT_EQ(Verdict(Json(o), c.check, c.node), "fail") << c.fault << "\n" << o.out.substr(0, 3000);
    ASSERT_EQ(sim.Fault(c.undo).exit_code, 0);
  }
  Output again = Sh(preflight);
  EXPECT_EQ(again.exit_code, 0) << again.out.substr(0, 3000);
}

}  // namespace
