// The table of model families: every model_type belongs to one row, LoadModel asks the row what a
// family supports, and each row's memory accounting equals what loading it allocates.
#include "engine/model/model_family.h"

#include <gtest/gtest.h>

#include <set>

#include "engine/backend/cpu/cpu_backend.h"
#include "comm/local_communicator.h"

namespace spark::engine::model {
namespace {

using backend::DType;

std::string FixtureDir(const std::string& name) {
  return std::string(SPARK_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

TEST(ModelFamilyTest, EveryModelTypeBelongsToExactlyOneRow) {
  std::set<std::string_view> seen;
  for (const ModelFamily* f : ModelFamilies()) {
    EXPECT_FALSE(f->model_types.empty()) << f->name;
    EXPECT_FALSE(f->backends.empty()) << f->name;
    EXPECT_NE(f->parse_config, nullptr) << f->name;
    EXPECT_NE(f->load, nullptr) << f->name;
    EXPECT_NE(f->memory, nullptr) << f->name;
    for (std::string_view t : f->model_types) {
      EXPECT_TRUE(seen.insert(t).second) << t << " is in two rows";
      EXPECT_EQ(FindModelFamily(t), f) << t;
      EXPECT_NE(KnownModelTypes().find(t), std::string::npos) << t;
    }
  }
  EXPECT_EQ(FindModelFamily("llama"), nullptr);
}

TEST(ModelFamilyTest, LoadModelRefusesWhatTheRowDoesNotSupport) {
  backend::cpu::CpuBackend backend(1);
  ModelOptions options;
  options.weight_dtype = DType::kFP8;  // FP8 / FP4 as released: the CPU backend has no kernels
  auto model = LoadModel(FixtureDir("deepseek-v4-tiny"), backend, nullptr, options);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("the cpu backend does not hold DeepSeek weights as "
                                          "released (FP8 / FP4); use --weight-dtype fp32"),
            std::string::npos)
      << model.status().message();
  const Status other = CheckSupported(*FindModelFamily("deepseek_v4"), "rocm", {});
  EXPECT_EQ(other.code(), StatusCode::kUnimplemented);
  EXPECT_NE(other.message().find("cpu or cuda backend only, not 'rocm'"), std::string::npos)
      << other.message();
  ModelOptions fp8_kv;
  fp8_kv.kv_dtype = DType::kFP8;
  const Status kv = CheckSupported(*FindModelFamily("qwen3"), "cpu", fp8_kv);
  EXPECT_NE(kv.message().find("an fp32 or bf16 KV cache only (fp8 asked)"), std::string::npos)
      << kv.message();
}

struct MemoryCase {
  std::string fixture;
  int tp;
  MoeSharding moe;
  DType weights;
  bool draft = false;  // the DSpark stack too (ModelOptions::load_draft)
};

class ModelMemoryTest : public testing::TestWithParam<MemoryCase> {};

// The row's accounting against the bytes the CPU backend holds once rank 0 has loaded (every
// matrix, vector and table), and against the KV cache the model asks for.
TEST_P(ModelMemoryTest, AccountingEqualsWhatLoadingAllocates) {
  const MemoryCase& c = GetParam();
  auto config = LoadModelConfig(FixtureDir(c.fixture));
  ASSERT_TRUE(config.ok()) << config.status().message();
  const ModelFamily* family = FindModelFamily(config->model_type);
  ASSERT_NE(family, nullptr);
  ModelOptions options;
  options.shard = {0, c.tp};
  options.moe_sharding = c.moe;
  options.weight_dtype = c.weights;
  options.load_draft = c.draft;
  auto memory = family->memory(*config, {options.shard, c.moe, c.weights, DType::kF32, c.draft});
  ASSERT_TRUE(memory.ok()) << memory.status().message();
  backend::cpu::CpuBackend backend(1);
  auto group = comm::CreateLocalGroup(c.tp);
  const size_t before = backend.bytes_in_use();
  auto model = LoadModel(FixtureDir(c.fixture), backend, c.tp > 1 ? group[0].get() : nullptr,
                         options);
  ASSERT_TRUE(model.ok()) << model.status().message();
  // Models may keep a small fixed workspace of their own (Qwen3: the launched-ahead ArgMax pairs).
  const int64_t workspace =
      c.fixture.rfind("deepseek", 0) == 0 ? 0 : int64_t{8} * 4096 * c.tp;
  EXPECT_EQ(static_cast<int64_t>(backend.bytes_in_use() - before) - workspace,
            memory->weight_bytes);
  EXPECT_EQ((*model)->kv_cache_spec().bytes_per_token(), memory->kv_bytes_per_token);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, ModelMemoryTest,
    testing::Values(MemoryCase{"qwen3-tiny", 1, MoeSharding::kInsideExperts, DType::kF32},
                    MemoryCase{"qwen3-tiny", 2, MoeSharding::kInsideExperts, DType::kF32},
                    MemoryCase{"qwen3-tiny", 1, MoeSharding::kInsideExperts, DType::kFP8},
                    MemoryCase{"qwen3-moe-tiny", 2, MoeSharding::kByExpert, DType::kF32},
                    MemoryCase{"qwen3-moe-tiny", 2, MoeSharding::kInsideExperts, DType::kFP8},
                    MemoryCase{"deepseek-v4-tiny", 1, MoeSharding::kByExpert, DType::kF32},
                    MemoryCase{"deepseek-v4-tiny", 2, MoeSharding::kInsideExperts, DType::kF32},
                    MemoryCase{"deepseek-v41-tiny", 1, MoeSharding::kByExpert, DType::kF32},
                    MemoryCase{"deepseek-v41-tiny", 2, MoeSharding::kInsideExperts, DType::kF32},
                    MemoryCase{"deepseek-v41-tiny/dspark", 1, MoeSharding::kByExpert, DType::kF32,
                               true},
                    MemoryCase{"deepseek-v41-tiny/dspark", 2, MoeSharding::kInsideExperts,
                               DType::kF32, true}));

}  // namespace
}  // namespace spark::engine::model
