// The speculative-step sweep (see speculative_sweep.h).
#include "bench/engine/speculative_sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <span>

#include "bench/engine/decode_bench_check.h"
#include "engine/model/step_runner.h"
#include "engine/runtime/drafter.h"
#include "engine/runtime/engine.h"

namespace spark::engine::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Proposes, for the sequence whose prompt `tokens` starts with, the tokens a recorded run put
// at the next positions (oracle), or those tokens each replaced by its successor in the
// vocabulary (wrong: a different token from the recorded one at every position). By position,
// not by matching the whole sequence: a run whose output has left the recorded one still gets
// k tokens a step.
class ReplayDrafter : public runtime::Drafter {
 public:
  ReplayDrafter(std::vector<std::vector<int32_t>> full, size_t prompt, bool wrong, int vocab)
      : full_(std::move(full)), prompt_(prompt), wrong_(wrong), vocab_(vocab) {}
  std::vector<int32_t> Propose(std::span<const int32_t> tokens, int max_tokens) override {
    for (const std::vector<int32_t>& f : full_) {
      if (f.size() <= tokens.size() || tokens.size() < prompt_ ||
          !std::equal(tokens.begin(), tokens.begin() + prompt_, f.begin())) {
        continue;
      }
      const size_t n = std::min<size_t>(max_tokens, f.size() - tokens.size());
      std::vector<int32_t> out(f.begin() + tokens.size(), f.begin() + tokens.size() + n);
      if (wrong_) {
        for (int32_t& t : out) t = (t + 1) % vocab_;
      }
      return out;
    }
    return {};
  }

 private:
  std::vector<std::vector<int32_t>> full_;
  size_t prompt_;
  bool wrong_;
  int vocab_;
};

std::vector<std::vector<int32_t>> Prompts(const SpeculativeSweepOptions& o, int vocab) {
  std::vector<std::vector<int32_t>> prompts(o.batch);
  for (int s = 0; s < o.batch; ++s) {
    for (int i = 0; i < o.prompt; ++i) prompts[s].push_back((s * 7919 + i * 104729) % vocab);
  }
  return prompts;
}

struct Run {
  SpeculativeRow row;
  std::vector<std::vector<int32_t>> out;
};

Run RunEngine(runtime::ModelRunner* runner, const SpeculativeSweepOptions& o, int vocab, int k,
              runtime::Drafter* drafter) {
  runtime::EngineOptions options;
  options.scheduler.max_num_seqs = o.batch;
  options.scheduler.max_num_batched_tokens = std::max(2048, o.batch * (o.prompt + 8));
  options.scheduler.max_model_len = o.max_len;
  options.blocks.num_blocks = int64_t{o.batch} * (o.max_len / o.block_size);
  options.blocks.block_size = o.block_size;
  options.blocks.enable_prefix_caching = false;
  options.argmax_plans = true;
  if (k > 0) {
    options.speculative.method = "ngram";
    options.speculative.num_speculative_tokens = k;
  }
  auto engine = Take(runtime::Engine::Create(options, runner), "engine");
  if (drafter != nullptr) engine->SetDrafter(drafter);
  const auto prompts = Prompts(o, vocab);
  for (int s = 0; s < o.batch; ++s) {
    runtime::SamplingParams params;
    params.temperature = 0.0f;
    params.max_tokens = o.tokens;
    params.ignore_eos = true;
    Check(engine->AddRequest(static_cast<uint64_t>(s), prompts[s], params), "request");
  }
  Run run;
  run.out.resize(o.batch);
  run.row.batch = o.batch;
  run.row.k = k;
  Clock::time_point t0;
  int64_t step = 0;
  while (engine->HasUnfinished()) {
    if (step == 1) t0 = Clock::now();  // after the prefill step
    auto outputs = Take(engine->Step(), "engine step");
    for (const runtime::TokenOutput& t : outputs) {
      if (!t.has_token) continue;
      run.out[t.seq_id].push_back(t.token);
      if (step >= 1) ++run.row.tokens;
    }
    ++step;
  }
  run.row.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  run.row.steps = step - 1;
  const runtime::EngineStats stats = engine->stats();
  run.row.draft_tokens = static_cast<int64_t>(stats.spec_draft_tokens);
  run.row.accepted_tokens = static_cast<int64_t>(stats.spec_accepted_tokens);
  return run;
}

}  // namespace

std::vector<SpeculativeRow> RunSpeculativeSweep(model::Model* model, backend::Backend& backend,
                                                const SpeculativeSweepOptions& o) {
  const int vocab = model->config().vocab_size;
  auto runner = Take(
      model::ModelStepRunner::Create(model, backend, int64_t{o.batch} * (o.max_len / o.block_size),
                                     o.block_size, /*return_logits=*/true,
                                     /*decode_graphs=*/true),
      "step runner");
  std::fprintf(stderr, "speculative sweep: batch %d: plain decode (warm-up, then timed)\n",
               o.batch);
  RunEngine(runner.get(), o, vocab, 0, nullptr);  // captures the decode graphs
  Run plain = RunEngine(runner.get(), o, vocab, 0, nullptr);
  plain.row.drafter = "none";
  std::vector<SpeculativeRow> rows{plain.row};
  auto with_output = [&](const Run& run) {
    std::vector<std::vector<int32_t>> full = Prompts(o, vocab);
    for (int s = 0; s < o.batch; ++s) {
      full[s].insert(full[s].end(), run.out[s].begin(), run.out[s].end());
    }
    return full;
  };
  auto compare = [&](Run& r) {
    r.row.ids_equal_plain = r.out == plain.out;
    for (int s = 0; s < o.batch; ++s) {
      const auto [a, b] = std::mismatch(r.out[s].begin(), r.out[s].end(), plain.out[s].begin(),
                                        plain.out[s].end());
      if (a == r.out[s].end() && b == plain.out[s].end()) continue;
      const int at = static_cast<int>(a - r.out[s].begin());
      if (r.row.first_difference < 0 || at < r.row.first_difference) r.row.first_difference = at;
    }
  };
  for (int k : o.ks) {
    // Wrong drafts first: every step verifies 1 + k rows and keeps one token. The oracle then
    // replays that run's output, which verify steps of this k produce (the plain run's may
    // differ where the verify path's rounding moves an argmax: a random model's top logits lie
    // close together).
    std::fprintf(stderr, "speculative sweep: batch %d: k %d, wrong drafts\n", o.batch, k);
    ReplayDrafter wrong(with_output(plain), o.prompt, /*wrong=*/true, vocab);
    Run w = RunEngine(runner.get(), o, vocab, k, &wrong);
    w.row.drafter = "wrong";
    compare(w);
    std::fprintf(stderr, "speculative sweep: batch %d: k %d, oracle drafts\n", o.batch, k);
    ReplayDrafter oracle(with_output(w), o.prompt, /*wrong=*/false, vocab);
    Run r = RunEngine(runner.get(), o, vocab, k, &oracle);
    r.row.drafter = "oracle";
    compare(r);
    rows.push_back(r.row);
    rows.push_back(w.row);
  }
  return rows;
}

double BreakEvenAcceptance(int k, double verify_ms, double plain_ms) {
  const double need = verify_ms / plain_ms;  // tokens a verify step must average
  auto expected = [k](double a) {
    double sum = 0, p = 1;
    for (int i = 0; i <= k; ++i, p *= a) sum += p;  // 1 + a + ... + a^k
    return sum;
  };
  if (need <= 1) return 0;
  if (expected(1.0) < need) return 1;
  double lo = 0, hi = 1;
  for (int i = 0; i < 60; ++i) {
    const double mid = (lo + hi) / 2;
    (expected(mid) < need ? lo : hi) = mid;
  }
  return hi;
}

}  // namespace spark::engine::bench
