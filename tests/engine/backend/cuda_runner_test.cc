// The serving path's decode graphs on the GPU: ModelStepRunner with decode_graphs on the CUDA
// backend runs the fixtures' prompts as the engine does (one prefill plan, then run-argmax
// decode plans of the live sequences, which the runner turns into graph steps keyed by batch
// size and block-table bucket, each launched ahead by the step before). The tokens must be
// transformers' greedy tokens, graphs must have been captured and replayed, the steps taken
// from launches ahead, and the MoE fixture (never in graphs) must still match.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/model/step_runner.h"
#include "kernels/cuda_check.h"
#include "tests/engine/backend/cuda_model_util.h"

namespace spark::engine::model {
namespace {

using namespace testing;

runtime::StepPlanEntry Entry(size_t i, std::vector<int32_t> tokens, int32_t start) {
  runtime::StepPlanEntry e;
  e.seq_id = i;
  e.token_ids = std::move(tokens);
  e.start_pos = start;
  for (int b = 0; b < kBlocksPerSeq; ++b) {
    e.block_table.push_back(static_cast<int32_t>((i * kBlocksPerSeq + b) % kBlocks));
  }
  e.needs_logits = true;
  return e;
}

class CudaRunnerTest : public CudaFixtureTest {};

TEST_P(CudaRunnerTest, DecodeGraphStepsGiveTransformersTokens) {
  auto model = LoadModel(dir, *gpu, nullptr, {});
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto runner = ModelStepRunner::Create(model->get(), *gpu, kBlocks, kBlockSize, true, true);
  ASSERT_TRUE(runner.ok()) << runner.status().message();
  std::vector<std::vector<int32_t>> out(cases.size());
  std::vector<int32_t> start(cases.size(), 0);
  runtime::StepPlan plan;
  plan.command = runtime::StepCommand::kRunArgMax;
  for (size_t i = 0; i < cases.size(); ++i) plan.entries.push_back(Entry(i, cases[i].prompt, 0));
  for (int step = 0; step < 16 && !plan.entries.empty(); ++step) {
    auto ids = (*runner)->Run(plan);
    ASSERT_TRUE(ids.ok()) << ids.status().message();
    ASSERT_EQ(ids->size(), plan.entries.size());
    runtime::StepPlan next;
    next.command = runtime::StepCommand::kRunArgMax;
    for (size_t k = 0; k < plan.entries.size(); ++k) {
      const size_t i = plan.entries[k].seq_id;
      const int32_t token = static_cast<int32_t>((*ids)[k]);
      out[i].push_back(token);
      start[i] += static_cast<int32_t>(plan.entries[k].token_ids.size());
      if (token == eos || out[i].size() >= cases[i].greedy.size()) continue;
      next.entries.push_back(Entry(i, {token}, start[i]));
    }
    plan = std::move(next);
  }
  ASSERT_TRUE(gpu->status().ok()) << gpu->status().message();
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(out[i], cases[i].greedy) << "case " << i;
  if (GetParam() == "qwen3-tiny") {
    EXPECT_GE(gpu->graph_count(), 1u);
    // Every decode step after the first was launched ahead by the one before and taken; the
    // last one launched (past the end) was dropped.
    EXPECT_GE((*runner)->taken_ahead(), 8);
    EXPECT_EQ((*runner)->launched_ahead(), (*runner)->taken_ahead() + 1);
  } else {
    EXPECT_EQ(gpu->graph_count(), 0u);
    EXPECT_EQ((*runner)->launched_ahead(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaRunnerTest,
                         ::testing::Values("qwen3-tiny", "qwen3-moe-tiny"), [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace spark::engine::model
