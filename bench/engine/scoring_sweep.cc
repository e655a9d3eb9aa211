// The prompt-scoring sweep (see scoring_sweep.h).
#include "bench/engine/scoring_sweep.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "bench/engine/decode_bench_check.h"
#include "engine/model/step_runner.h"
#include "engine/runtime/engine.h"

namespace spark::engine::bench {
namespace {

using Clock = std::chrono::steady_clock;

ScoringRow RunOnce(runtime::ModelRunner* runner, const ScoringSweepOptions& o, int vocab,
                   int prompt, bool scored) {
  runtime::EngineOptions options;
  options.scheduler.max_num_seqs = o.batch;
  options.scheduler.max_model_len = prompt + o.block_size;
  options.scheduler.max_num_batched_tokens =
      std::max(o.max_num_batched_tokens, options.scheduler.max_model_len);
  const int blocks_per_seq = (prompt + 2 * o.block_size) / o.block_size;
  options.blocks.num_blocks = int64_t{o.batch} * blocks_per_seq;
  options.blocks.block_size = o.block_size;
  options.blocks.enable_prefix_caching = false;
  options.argmax_plans = true;
  auto engine = Take(runtime::Engine::Create(options, runner), "engine");
  for (int s = 0; s < o.batch; ++s) {
    std::vector<int32_t> ids(prompt);
    for (int i = 0; i < prompt; ++i) ids[i] = (s * 7919 + i * 104729) % vocab;
    runtime::SamplingParams params;
    params.temperature = 0.0f;
    params.ignore_eos = true;
    if (scored) {
      params.prompt_logprobs = 0;
      params.max_tokens = 0;
    } else {
      params.max_tokens = 1;
    }
    Check(engine->AddRequest(static_cast<uint64_t>(s), std::move(ids), params), "request");
  }
  ScoringRow row{.batch = o.batch, .prompt = prompt, .scored = scored};
  const auto t0 = Clock::now();
  while (engine->HasUnfinished()) {
    Take(engine->Step(), "engine step");
    ++row.steps;
  }
  row.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return row;
}

}  // namespace

std::vector<ScoringRow> RunScoringSweep(model::Model* model, backend::Backend& backend,
                                        const ScoringSweepOptions& o) {
  const int vocab = model->config().vocab_size;
  const int longest = *std::max_element(o.prompts.begin(), o.prompts.end());
  const int64_t blocks = int64_t{o.batch} * ((longest + 2 * o.block_size) / o.block_size);
  auto runner = Take(model::ModelStepRunner::Create(model, backend, blocks, o.block_size,
                                                   /*return_logits=*/true),
                     "step runner");
  std::vector<ScoringRow> rows;
  for (int prompt : o.prompts) {
    for (bool scored : {false, true}) {
      std::fprintf(stderr, "scoring sweep: batch %d, %d-token prompts, %s\n", o.batch, prompt,
                   scored ? "scored" : "plain");
      RunOnce(runner.get(), o, vocab, prompt, scored);  // warm-up: plans, autotune
      rows.push_back(RunOnce(runner.get(), o, vocab, prompt, scored));
    }
  }
  return rows;
}

}  // namespace spark::engine::bench
