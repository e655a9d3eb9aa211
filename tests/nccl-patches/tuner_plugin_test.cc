// The Spark tuner plugin as NCCL loads it: dlopen() of the built libnccl-tuner-spark.so, its
// v7, v6 and v5 entry points looked up by name, init with SPARK_NCCL_TOPOLOGY set as netplan's
// fabric kinds name it, and getCollInfo on cost tables shaped as NCCL passes them. On a ring,
// line or pair every algorithm but Ring is ignored, LL wins up to 64 KiB and Simple above, with
// 2/4/8 channels; on a switched fabric or without the variable the table is untouched; an
// unknown fabric fails init naming the variable. Also the policy on its own.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "nccl_tuner_abi.h"
#include "ring_policy.h"

namespace spark::nccl_tuner {
namespace {

const char* kPlugin = SPARK_BINARY_DIR "/lib/libnccl-tuner-spark.so";

std::vector<std::string> g_log;

void Log(LogLevel level, unsigned long flags, const char*, int, const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  g_log.push_back(std::to_string(level) + "/" + std::to_string(flags) + " " + buf);
}

// A table where NCCL's own model prefers Tree/LL128 (as it might on a switch).
std::vector<float> Table() {
  std::vector<float> t(kNumAlgos * kNumProtos, kIgnore);
  auto at = [&](int a, int p) -> float& { return t[a * kNumProtos + p]; };
  at(kAlgoTree, kProtoLL) = 9;
  at(kAlgoTree, kProtoLL128) = 5;
  at(kAlgoTree, kProtoSimple) = 12;
  at(kAlgoRing, kProtoLL) = 20;
  at(kAlgoRing, kProtoLL128) = 15;
  at(kAlgoRing, kProtoSimple) = 30;
  at(kAlgoPat, kProtoSimple) = 7;
  return t;
}

// The entry NCCL would pick: the cheapest non-negative one.
std::pair<int, int> Pick(const std::vector<float>& t) {
  std::pair<int, int> best{-1, -1};
  float cost = 1e30f;
  for (int a = 0; a < kNumAlgos; ++a) {
    for (int p = 0; p < kNumProtos; ++p) {
      const float c = t[a * kNumProtos + p];
      if (c >= 0 && c < cost) {
        cost = c;
        best = {a, p};
      }
    }
  }
  return best;
}

class TunerPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = dlopen(kPlugin, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
    v7_ = static_cast<const TunerV7*>(dlsym(lib_, "ncclTunerPlugin_v7"));
    v6_ = static_cast<const TunerV6*>(dlsym(lib_, "ncclTunerPlugin_v6"));
    v5_ = static_cast<const TunerV5*>(dlsym(lib_, "ncclTunerPlugin_v5"));
    ASSERT_NE(v7_, nullptr);
    ASSERT_NE(v6_, nullptr);
    ASSERT_NE(v5_, nullptr);
    g_log.clear();
  }
  void TearDown() override {
    unsetenv("SPARK_NCCL_TOPOLOGY");
    if (lib_) dlclose(lib_);
  }
  // init (v7) with the variable set (or unset when empty), 4 ranks on 4 nodes.
  void* Init(const char* fabric, Result want = kSuccess) {
    if (*fabric) {
      setenv("SPARK_NCCL_TOPOLOGY", fabric, 1);
    } else {
      unsetenv("SPARK_NCCL_TOPOLOGY");
    }
    void* ctx = nullptr;
    NvlDomainInfo nvl{4, 1, 1};
    ConstantsV7 constants{};
    EXPECT_EQ(v7_->init(&ctx, 42, 4, 4, Log, &nvl, &constants), want);
    return ctx;
  }
  std::pair<int, int> Choose(void* ctx, Func coll, size_t bytes, std::vector<float>* t,
                             int* channels, const TunerV5* v5 = nullptr) {
    auto fn = v5 ? v5->get_coll_info : v7_->get_coll_info;
    EXPECT_EQ(fn(ctx, coll, bytes, 1, reinterpret_cast<float**>(t->data()), kNumAlgos,
                 kNumProtos, 0, channels),
              kSuccess);
    return Pick(*t);
  }

  void* lib_ = nullptr;
  const TunerV7* v7_ = nullptr;
  const TunerV6* v6_ = nullptr;
  const TunerV5* v5_ = nullptr;
};

TEST_F(TunerPluginTest, ExportsEveryVersionUnderOneName) {
  EXPECT_STREQ(v7_->name, "SparkRing");
  EXPECT_STREQ(v6_->name, "SparkRing");
  EXPECT_STREQ(v5_->name, "SparkRing");
  EXPECT_EQ(v7_->get_chunk_size, nullptr);  // NCCL keeps its chunk size
  // Only NCCL's entry points leave the library.
  EXPECT_EQ(dlsym(lib_, "_ZN5spark11nccl_tuner6DecideENS0_6FabricENS0_4FuncEmPKfii"), nullptr);
}

TEST_F(TunerPluginTest, RingUsesRingWithLLForSmallAndSimpleForLargeMessages) {
  for (const char* fabric : {"ring", "line", "pair"}) {
    void* ctx = Init(fabric);
    ASSERT_NE(ctx, nullptr);
    struct Row {
      Func coll;
      size_t bytes;
      int proto;
      int channels;
    };
    for (const Row& row : {Row{kAllReduce, 4096, kProtoLL, 2}, Row{kAllReduce, 10240, kProtoLL, 2},
                           Row{kAllReduce, 65536, kProtoLL, 2},
                           Row{kAllReduce, 65537, kProtoSimple, 4},
                           Row{kAllGather, 1 << 20, kProtoSimple, 4},
                           Row{kReduceScatter, 32 << 20, kProtoSimple, 8}}) {
      std::vector<float> t = Table();
      int channels = -1;
      const auto [algo, proto] = Choose(ctx, row.coll, row.bytes, &t, &channels);
      EXPECT_EQ(algo, kAlgoRing) << fabric << " " << row.bytes;
      EXPECT_EQ(proto, row.proto) << fabric << " " << row.bytes;
      EXPECT_EQ(channels, row.channels) << fabric << " " << row.bytes;
      for (int p = 0; p < kNumProtos; ++p) {
        EXPECT_EQ(t[kAlgoTree * kNumProtos + p], kIgnore) << "Tree stays out on a " << fabric;
        EXPECT_EQ(t[kAlgoPat * kNumProtos + p], kIgnore) << "PAT stays out on a " << fabric;
      }
    }
    ASSERT_EQ(v7_->finalize(ctx), kSuccess);
  }
  // NCCL's log gets the fabric at init and each decision once per size class.
  bool init_line = false, decision_line = false;
  for (const std::string& line : g_log) {
    init_line |= line.find("SparkRing tuner: ring fabric, 4 ranks on 4 nodes") != std::string::npos;
    decision_line |= line.find("AllReduce 10240 bytes -> Ring/LL, 2 channels") != std::string::npos;
  }
  EXPECT_TRUE(init_line);
  EXPECT_TRUE(decision_line);
}

TEST_F(TunerPluginTest, AnUnavailableProtocolFallsToTheNextAndTheV5EntryAgrees) {
  void* ctx = Init("ring");
  std::vector<float> t = Table();
  t[kAlgoRing * kNumProtos + kProtoLL] = kIgnore;  // NCCL_PROTO=^LL, say
  int channels = 0;
  EXPECT_EQ(Choose(ctx, kAllReduce, 8192, &t, &channels, v5_), std::make_pair(kAlgoRing, kProtoSimple));
  v7_->finalize(ctx);
}

TEST_F(TunerPluginTest, SwitchedOrUnsetLeavesNcclsChoice) {
  for (const char* fabric : {"switched", ""}) {
    void* ctx = Init(fabric);
    std::vector<float> t = Table();
    const std::vector<float> before = t;
    int channels = -7;
    EXPECT_EQ(Choose(ctx, kAllReduce, 10240, &t, &channels), std::make_pair(kAlgoTree, kProtoLL128));
    EXPECT_EQ(t, before) << fabric;
    EXPECT_EQ(channels, -7) << fabric;
    v7_->finalize(ctx);
  }
  bool said = false;
  for (const std::string& line : g_log) said |= line.find("SPARK_NCCL_TOPOLOGY unset") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST_F(TunerPluginTest, AnUnknownFabricFailsInitNamingTheVariable) {
  Init("torus", kInvalidArgument);
  ASSERT_FALSE(g_log.empty());
  EXPECT_NE(g_log.back().find("SPARK_NCCL_TOPOLOGY=torus is not a fabric"), std::string::npos)
      << g_log.back();
}

TEST(RingPolicyTest, NoRingAtAllKeepsNcclsChoice) {
  std::vector<float> t = Table();
  for (int p = 0; p < kNumProtos; ++p) t[kAlgoRing * kNumProtos + p] = kIgnore;
  EXPECT_FALSE(Decide(Fabric::kRing, kAllReduce, 4096, t.data(), kNumAlgos, kNumProtos).change);
  EXPECT_FALSE(Decide(Fabric::kRing, static_cast<Func>(6), 4096, Table().data(), kNumAlgos,
                      kNumProtos).change);
  Fabric f;
  EXPECT_FALSE(ParseFabric("", &f));
  EXPECT_TRUE(ParseFabric("switched", &f));
  EXPECT_EQ(f, Fabric::kSwitched);
}

}  // namespace
}  // namespace spark::nccl_tuner
