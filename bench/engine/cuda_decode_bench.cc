// spark-decode-bench: the engine's CUDA backend on a Qwen3-8B-shaped model with random weights
// (bf16 Linear weights generated on the GPU), end to end through Qwen3Model: greedy decode
// tokens/s at each batch size (CUDA graphs, and eagerly for comparison), the same at TP=2 on
// two GPUs (peer all-reduce in graphs, or NCCL eagerly with --tp-nccl), and one 8K-token
// prefill. Ceilings measured in the same run on GPU 0:
// device-to-device copy bandwidth and cuBLASLt's bf16 GEMM throughput at 8192^3.
// Decode follows ../shared/bench/peer_torch_decode.py: a 64-token prompt per sequence, 16
// warm-up steps, then --steps timed steps (wall clock, host work included), twice: with the host
// waiting for each step's ids ("waits"), and launched ahead of it ("ahead": Model::LaunchArgMax,
// the ids fed on the GPU, as the peer's loop never reads its tokens). The graphs of every
// context bucket are captured before timing; "gpu ms" and "gap us" split a step into the GPU's
// time and the GPU's wait for the host before it (CUDA events). At TP=1 the serving engine's
// own loop (runtime::Engine over ModelStepRunner, "engine") runs the same steps too.
// --speculative K,...: the engine's speculative step at each k with an oracle drafter (every
// draft accepted) and an always-wrong one, against plain decode (speculative_sweep.h).
// --scoring N,...: prefill of N-token prompts with and without prompt scoring (scoring_sweep.h).
// Prints a table; --json writes every figure (bench/engine/cuda_backend.sh merges it).
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench/engine/decode_bench_check.h"
#include "bench/engine/gpu_ceilings.h"
#include "bench/engine/scoring_sweep.h"
#include "bench/engine/speculative_sweep.h"
#include "bench/engine/timing_backend.h"
#include "comm/nccl_communicator.h"
#include "comm/rendezvous.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/stream_ordered_communicator.h"
#include "engine/config/environment.h"
#include "engine/core/model_config.h"
#include "engine/model/model_family.h"
#include "engine/model/qwen3/qwen3_model.h"
#include "engine/model/step_runner.h"
#include "engine/runtime/engine.h"
#include "kernels/elementwise.h"
#include "kernels/fp8.h"
#include "kernels/gemm.h"
#include "kernels/launch_settings.h"

namespace spark::engine {
namespace {

using backend::Buffer;
using backend::DType;
using backend::cuda::CudaBackend;
using bench::Check;
using bench::Cuda;
using bench::Take;
using bench::TimingBackend;
using Clock = std::chrono::steady_clock;

constexpr char kQwen3_8B[] = R"({
  "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
  "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
  "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "rms_norm_eps": 1e-6,
  "rope_theta": 1000000.0, "max_position_embeddings": 40960, "tie_word_embeddings": false
})";
constexpr int kBlockSize = 16;
constexpr int kMaxLen = 1024;  // the peer's static cache length
constexpr int kTableBlocks = kMaxLen / kBlockSize;
constexpr int kPrompt = 64, kWarmup = 16;

// The Linear weights' element type (--weight-dtype; set before the first run).
DType g_weight_dtype = DType::kBF16;

// Weights of one rank, uniform in +-0.0346 (std 0.02, the peer's init), norms at 1.
struct RandomModel {
  model::qwen3::Qwen3Weights weights;
  int64_t streamed_bytes = 0;  // what one decode step reads: matrices, norms, one embedding row
};

RandomModel MakeWeights(const core::ModelConfig& c, const model::TpShard& shard, CudaBackend& b) {
  RandomModel m;
  model::qwen3::Qwen3Weights& w = m.weights;
  w.heads = shard.Heads(c);
  w.kv_heads = shard.KvHeads(c);
  w.vocab = shard.Vocab(c.vocab_size);
  w.dense_inter = static_cast<int>(shard.Even(c.intermediate_size).size);
  uint64_t seed = 1000 + shard.rank;
  auto make = [&](int64_t rows, int64_t cols, DType dtype, bool ones, bool streamed) {
    Buffer buf = Take(b.AllocateMatrix(rows, cols, dtype), "allocate weights");
    const float lo = ones ? 1.0f : -0.0346f, hi = ones ? 1.0f : 0.0346f;
    const size_t count = static_cast<size_t>(rows * cols);
    Status s;
    if (dtype == DType::kFP8) {
      // Codes uniform over +-448, every block scaled to the same +-0.0346.
      const int64_t blocks = backend::Fp8ScaleCount(rows, cols);
      float* scales = backend::Fp8Scales(buf.raw(), count);
      s = kernels::FillFp8Uniform(static_cast<uint8_t*>(buf.raw()), count, ++seed, -448.0f, 448.0f,
                                  b.stream());
      if (s.ok()) s = kernels::FillUniform(scales, blocks, seed, hi / 448, hi / 448, b.stream());
      if (streamed) m.streamed_bytes += blocks * 4;
    } else if (dtype == DType::kBF16) {
      s = kernels::FillUniform(static_cast<__nv_bfloat16*>(buf.raw()), count, ++seed, lo, hi,
                               b.stream());
    } else {
      s = kernels::FillUniform(buf.data(), count, ++seed, lo, hi, b.stream());
    }
    Check(s, "fill weights");
    if (streamed) m.streamed_bytes += rows * cols * static_cast<int64_t>(DTypeBytes(dtype));
    return buf;
  };
  const DType wt = g_weight_dtype;
  const int64_t hidden = c.hidden_size, hd = c.head_dim;
  const int64_t q = w.heads.size * hd, kv = w.kv_heads.size * hd, inter = w.dense_inter;
  w.embed = make(w.vocab.size, hidden, DType::kF32, false, false);
  m.streamed_bytes += hidden * 4;  // the one row a token reads
  w.lm_head = make(w.vocab.size, hidden, wt, false, true);
  w.final_norm = make(1, hidden, DType::kF32, true, true);
  for (int i = 0; i < c.num_layers; ++i) {
    model::qwen3::Qwen3LayerWeights l;
    l.input_norm = make(1, hidden, DType::kF32, true, true);
    l.post_attention_norm = make(1, hidden, DType::kF32, true, true);
    if (wt == DType::kFP8) {  // three matrices, as the loader makes them
      l.q = make(q, hidden, wt, false, true);
      l.k = make(kv, hidden, wt, false, true);
      l.v = make(kv, hidden, wt, false, true);
    } else {
      l.qkv = make(q + 2 * kv, hidden, wt, false, true);  // stacked, as the loader does
      l.SplitQkv(q, kv, hidden);
    }
    l.q_norm = make(1, hd, DType::kF32, true, true);
    l.k_norm = make(1, hd, DType::kF32, true, true);
    l.o = make(hidden, q, wt, false, true);
    l.gate_up = make(2 * inter, hidden, wt, false, true);
    l.down = make(hidden, inter, wt, false, true);
    w.layers.push_back(std::move(l));
  }
  Check(b.Synchronize(), "fill weights");
  return m;
}

struct DecodeResult {
  int batch = 0;
  double graph_tok_s = 0, eager_tok_s = 0;
  double graph_ms_per_step = 0;
  // Of a timed graph step: the GPU's time from the step's first work to its end, and the gap
  // before it where the GPU waited for the host (CudaBackend::GraphStepTimes).
  double gpu_ms_per_step = 0, host_gap_us_per_step = 0;
  // The same steps launched ahead of the host (Model::LaunchArgMax with ids_from_last: the
  // host stages and launches step i + 1 before it takes step i's ids, as the peer's loop never
  // waits for its tokens); 0 when the steps did not run in graphs.
  double ahead_tok_s = 0, ahead_ms_per_step = 0;
  double ahead_gpu_ms_per_step = 0, ahead_gap_us_per_step = 0;
  // The serving engine's own loop on the same model (RunEngine); 0 when not run.
  double engine_tok_s = 0, engine_ms_per_step = 0;
  int64_t engine_launched_ahead = 0, engine_taken_ahead = 0;
  int64_t kv_bytes_per_step = 0;  // K and V read at the mean timed context, all layers
};

struct RankSetup {
  core::ModelConfig config;
  model::TpShard shard;
  std::unique_ptr<CudaBackend> backend;
  std::unique_ptr<comm::Rendezvous> rendezvous;
  std::unique_ptr<comm::NcclCommunicator> nccl;
  std::unique_ptr<backend::cuda::StreamOrderedCommunicator> comm;
  std::unique_ptr<TimingBackend> timing;  // --profile only: the model's ops go through it
  std::unique_ptr<model::qwen3::Qwen3Model> model;
  int64_t streamed_bytes = 0;
};

// One decode step for every sequence: ids in, next ids out.
model::ForwardBatch DecodeBatch(const std::vector<int32_t>& ids, int64_t cached) {
  model::ForwardBatch batch;
  for (size_t s = 0; s < ids.size(); ++s) {
    std::vector<int32_t> table(kTableBlocks);
    for (int j = 0; j < kTableBlocks; ++j) table[j] = static_cast<int32_t>(s * kTableBlocks + j);
    batch.AddSequence(std::span<const int32_t>(&ids[s], 1), cached, std::move(table), kBlockSize);
  }
  return batch;
}

DecodeResult RunDecode(RankSetup& r, model::PagedKvCache& cache, int batch_size, int steps,
                       bool graphs) {
  const core::ModelConfig& c = r.config;
  DecodeResult res;
  res.batch = batch_size;
  // Prompt: kPrompt ids per sequence, one eager prefill.
  model::ForwardBatch prompt;
  for (int s = 0; s < batch_size; ++s) {
    std::vector<int32_t> ids(kPrompt), table(kTableBlocks);
    for (int i = 0; i < kPrompt; ++i) ids[i] = (s * 7919 + i * 104729) % c.vocab_size;
    for (int j = 0; j < kTableBlocks; ++j) table[j] = s * kTableBlocks + j;
    prompt.AddSequence(ids, 0, std::move(table), kBlockSize);
  }
  std::vector<int32_t> next;
  Check(r.model->ForwardArgMax(prompt, cache, &next), "prefill prompt");
  int64_t cached = kPrompt;
  // Graphs per batch size and context bucket (the decode split is planned for the bucket).
  auto bucket_of = [](int64_t cached_before) {
    int bucket = 4;
    while (bucket * kBlockSize < cached_before + 1) bucket *= 2;
    return bucket;
  };
  // A key names one op sequence: steps launched ahead (LaunchArgMax) take their own, and those
  // fed the step before's ids another.
  auto begin_graph = [&](const char* kind) {
    Check(r.backend->BeginGraph(kind + std::to_string(batch_size), bucket_of(cached)), "graph");
  };
  // Captures every graph that `steps` steps from `from` will use before they are timed: a few
  // steps (run_some) at `from` and wherever a step enters a new context bucket (their K/V is
  // written again by the timed steps); `cached` is back at `from` afterwards.
  auto capture_buckets = [&](int64_t from, const std::function<void()>& run_some) {
    for (int64_t at = from; at < from + steps; ++at) {
      if (at != from && bucket_of(at) == bucket_of(at - 1)) continue;
      cached = at;
      run_some();
    }
    cached = from;
  };
  auto step = [&](bool graph) {
    model::ForwardBatch b = DecodeBatch(next, cached);
    if (graph) begin_graph("decode-b");
    Check(r.model->ForwardArgMax(b, cache, &next), "decode step");
    ++cached;
  };
  step(false);  // eager first: builds the RoPE table and cuBLAS plans
  for (int i = 1; i < kWarmup; ++i) step(graphs);
  const int64_t first_ctx = cached + 1;
  if (graphs) {
    capture_buckets(cached, [&] {
      step(true);
      step(true);
    });
  }
  if (r.comm) Check(r.comm->Barrier(), "barrier");
  r.backend->ResetGraphStepTimes();
  auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i) step(graphs);
  const double graph_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const CudaBackend::GraphStepTimes& times = r.backend->graph_step_times();
  if (times.steps > 0) res.gpu_ms_per_step = times.gpu_ms / times.steps;
  if (times.gaps > 0) res.host_gap_us_per_step = times.gap_ms * 1e3 / times.gaps;
  const double mean_ctx = first_ctx + (steps - 1) / 2.0;
  res.kv_bytes_per_step = static_cast<int64_t>(batch_size * mean_ctx) * 2 * c.num_layers *
                          r.model->kv_cache_spec().kv_width *
                          static_cast<int64_t>(backend::DTypeBytes(r.model->kv_cache_spec().dtype));
  res.graph_tok_s = batch_size * steps / graph_s;
  res.graph_ms_per_step = graph_s * 1e3 / steps;
  if (graphs) {
    // The same positions again (their K/V overwritten), each step launched before the host
    // takes the one before it (two steps in flight: graphs for both host areas).
    const int64_t ahead_from = first_ctx - 1;
    auto launch = [&](bool from_last) {
      model::ForwardBatch b = DecodeBatch(next, cached);  // ids unread with from_last
      begin_graph(from_last ? "decode-fed-b" : "decode-first-b");
      Check(r.model->LaunchArgMax(b, cache, from_last), "launch step");
      ++cached;
    };
    auto run_ahead = [&](int n) {
      launch(false);
      for (int i = 1; i < n; ++i) {
        launch(true);
        Check(r.model->TakeArgMax(&next), "take step");
      }
      Check(r.model->TakeArgMax(&next), "take step");
    };
    cached = ahead_from - kWarmup;
    run_ahead(kWarmup);
    capture_buckets(ahead_from, [&] { run_ahead(3); });  // fed steps in both host areas
    if (r.comm) Check(r.comm->Barrier(), "barrier");
    r.backend->ResetGraphStepTimes();
    t0 = Clock::now();
    run_ahead(steps);
    const double ahead_s = std::chrono::duration<double>(Clock::now() - t0).count();
    res.ahead_tok_s = batch_size * steps / ahead_s;
    res.ahead_ms_per_step = ahead_s * 1e3 / steps;
    if (times.steps > 0) res.ahead_gpu_ms_per_step = times.gpu_ms / times.steps;
    if (times.gaps > 0) res.ahead_gap_us_per_step = times.gap_ms * 1e3 / times.gaps;
  }
  // Eager steps (no graph) for comparison; fewer of them.
  cached = first_ctx - 1 + steps;
  const int eager_steps = std::max(1, steps / 5);
  if (cached + eager_steps < kMaxLen) {
    if (r.comm) Check(r.comm->Barrier(), "barrier");
    t0 = Clock::now();
    for (int i = 0; i < eager_steps; ++i) step(false);
    res.eager_tok_s =
        batch_size * eager_steps / std::chrono::duration<double>(Clock::now() - t0).count();
  }
  return res;
}

// The serving engine's loop on the same model: runtime::Engine (scheduler, greedy plans, stop
// checks) over ModelStepRunner with decode graphs, which launches each decode step ahead while
// the engine handles the one before. batch_size requests of kPrompt ids, greedy, kWarmup +
// steps tokens each with EOS ignored, so the same positions as RunDecode. Two rounds: the
// first captures the graphs, the second's decode steps after kWarmup are timed (wall clock).
void RunEngine(RankSetup& r, int batch_size, int steps, DecodeResult* res) {
  constexpr int kBlocksPerSeq = kMaxLen / kBlockSize;
  auto runner = Take(
      model::ModelStepRunner::Create(r.model.get(), *r.backend, int64_t{batch_size} * kBlocksPerSeq,
                                     kBlockSize, true, true),
      "step runner");
  runtime::EngineOptions options;
  options.scheduler.max_num_seqs = batch_size;
  options.scheduler.max_num_batched_tokens = std::max(2048, batch_size * kPrompt);
  options.scheduler.max_model_len = kMaxLen;
  options.blocks.num_blocks = batch_size * kBlocksPerSeq;
  options.blocks.block_size = kBlockSize;
  options.blocks.enable_prefix_caching = false;
  options.argmax_plans = true;
  for (int round = 0; round < 2; ++round) {
    auto engine = Take(runtime::Engine::Create(options, runner.get()), "engine");
    for (int s = 0; s < batch_size; ++s) {
      std::vector<int32_t> ids(kPrompt);
      for (int i = 0; i < kPrompt; ++i)
        ids[i] = (s * 7919 + i * 104729 + round) % r.config.vocab_size;
      runtime::SamplingParams params;
      params.temperature = 0.0f;
      params.max_tokens = kWarmup + steps;
      params.ignore_eos = true;
      Check(engine->AddRequest(static_cast<uint64_t>(s), std::move(ids), params), "request");
    }
    int done = 0;  // steps run: the prefill, then one decode step per token after the first
    auto t0 = Clock::now();
    while (engine->HasUnfinished()) {
      if (done == 1 + kWarmup) t0 = Clock::now();
      Take(engine->Step(), "engine step");
      ++done;
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    const int timed = done - 1 - kWarmup;
    if (round == 1 && timed > 0) {
      res->engine_tok_s = batch_size * timed / s;
      res->engine_ms_per_step = s * 1e3 / timed;
    }
  }
  res->engine_launched_ahead = runner->launched_ahead();
  res->engine_taken_ahead = runner->taken_ahead();
}

// The KV cache's element type for every run (--kv-dtype; set before the first run).
DType g_kv_dtype = DType::kBF16;
// ModelOptions::fuse_residual (--no-fuse-residual turns it off).
bool g_fuse_residual = true;
// CudaBackend::Options::fuse_all_reduce_norm (--no-fuse-all-reduce-norm turns it off).
bool g_fuse_all_reduce_norm = true;
// The peer all-reduce's protocol (--peer-one-way: kernels::PeerProtocol::kOneWay).
kernels::PeerProtocol g_peer_protocol = kernels::PeerProtocol::kSignal;
// --rank-share N: the model's heads, KV heads, intermediate size and vocabulary divided by N
// (one rank's matrices at TP=N, timed alone: no collectives).
int g_rank_share = 1;

// nccl_only: TP collectives through NCCL (eager steps) even where the peer all-reduce works.
void SetUpRank(RankSetup& r, int rank, int world, int port, bool profile = false,
               bool nccl_only = false) {
  r.config = Take(model::ParseModelConfig(kQwen3_8B, "qwen3-8b-shape/config.json"), "config");
  r.config.num_heads /= g_rank_share;
  r.config.num_kv_heads /= g_rank_share;
  r.config.intermediate_size /= g_rank_share;
  r.config.vocab_size /= g_rank_share;
  r.shard = {rank, world};
  r.backend = Take(CudaBackend::Create({.device = rank,
                                        .bf16_attention = true,
                                        .time_graph_steps = true,
                                        .fuse_all_reduce_norm = g_fuse_all_reduce_norm}),
                   "cuda backend");
  if (world > 1) {
    comm::RendezvousOptions ro;
    ro.rank = rank;
    ro.world_size = world;
    ro.master_port = port;
    r.rendezvous = Take(comm::Rendezvous::Connect(ro), "rendezvous");
    r.nccl = Take(comm::NcclCommunicator::Create(*r.rendezvous, rank), "nccl");
    r.comm =
        std::make_unique<backend::cuda::StreamOrderedCommunicator>(r.nccl.get(), r.backend.get());
    if (!nccl_only) {
      if (Status s = r.comm->EnablePeerAllReduce(size_t{1} << 18, g_peer_protocol);
          !s.ok() && rank == 0) {
        std::printf("tp %d: no peer all-reduce (%s); NCCL, eager steps\n", world,
                    s.message().c_str());
      }
    }
  }
  RandomModel m = MakeWeights(r.config, r.shard, *r.backend);
  r.streamed_bytes = m.streamed_bytes;
  model::ModelOptions options;
  options.shard = r.shard;
  options.weight_dtype = g_weight_dtype;
  options.kv_dtype = g_kv_dtype;
  options.fuse_residual = g_fuse_residual;
  if (profile) r.timing = std::make_unique<TimingBackend>(*r.backend);
  backend::Backend& ops = r.timing ? static_cast<backend::Backend&>(*r.timing) : *r.backend;
  r.model = std::make_unique<model::qwen3::Qwen3Model>(r.config, std::move(m.weights), ops,
                                                       r.comm.get(), options);
}

// Runs the decode batches on `world` GPUs (one thread per rank); rank 0's figures. Steps run in
// CUDA graphs at TP=1 and where the collectives allow it (the peer all-reduce); *graphs says.
std::vector<DecodeResult> DecodeOnGpus(int world, const std::vector<int>& batches, int steps,
                                       int port, bool nccl_only, int64_t* streamed_bytes,
                                       bool* graphs) {
  std::vector<std::vector<DecodeResult>> results(world);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      RankSetup r;
      SetUpRank(r, rank, world, port, false, nccl_only);
      const bool use_graphs = world == 1 || r.comm->collectives_in_graphs();
      if (rank == 0) *graphs = use_graphs;
      const int max_batch = *std::max_element(batches.begin(), batches.end());
      model::PagedKvCache cache =
          Take(model::PagedKvCache::Create(*r.backend, r.model->kv_cache_spec(),
                                           int64_t{max_batch} * kTableBlocks, kBlockSize),
               "kv cache");
      for (int b : batches) {
        results[rank].push_back(RunDecode(r, cache, b, steps, use_graphs));
        if (world == 1 && use_graphs) RunEngine(r, b, steps, &results[rank].back());
      }
      if (rank == 0) *streamed_bytes = r.streamed_bytes;
    });
  }
  for (auto& t : threads) t.join();
  return results[0];
}

// One eager decode step per batch size at context ~kPrompt, every op timed.
void Profile(const std::vector<int>& batches, double copy_gbs) {
  RankSetup r;
  SetUpRank(r, 0, 1, 0, /*profile=*/true);
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  model::PagedKvCache cache =
      Take(model::PagedKvCache::Create(*r.backend, r.model->kv_cache_spec(),
                                       int64_t{max_batch} * kTableBlocks, kBlockSize),
           "kv cache");
  for (int b : batches) {
    std::vector<int32_t> ids(b, 17), next;
    for (int rep = 0; rep < 2; ++rep) {  // the first warms up plans and tables
      r.timing->Clear();
      Check(r.model->ForwardArgMax(DecodeBatch(ids, kPrompt + rep), cache, &next), "profile");
    }
    std::printf("profile: one eager decode step, batch %d (each op waited for)\n", b);
    r.timing->Print(copy_gbs);
  }
}

struct PrefillResult {
  int tokens = 0;
  double seconds = 0, tflops = 0, matmul_flops = 0, attention_flops = 0;
};

PrefillResult RunPrefill(int tokens) {
  RankSetup r;
  SetUpRank(r, 0, 1, 0);
  const core::ModelConfig& c = r.config;
  const int blocks = (tokens + kBlockSize - 1) / kBlockSize;
  model::PagedKvCache cache =
      Take(model::PagedKvCache::Create(*r.backend, r.model->kv_cache_spec(), blocks, kBlockSize),
           "kv cache");
  std::vector<int32_t> ids(tokens), table(blocks);
  for (int i = 0; i < tokens; ++i) ids[i] = (i * 104729) % c.vocab_size;
  for (int j = 0; j < blocks; ++j) table[j] = j;
  model::ForwardBatch batch;
  batch.AddSequence(ids, 0, table, kBlockSize);
  std::vector<int32_t> next;
  Check(r.model->ForwardArgMax(batch, cache, &next), "prefill warm-up");
  const auto t0 = Clock::now();
  Check(r.model->ForwardArgMax(batch, cache, &next), "prefill");
  PrefillResult p;
  p.tokens = tokens;
  p.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const double hidden = c.hidden_size, q = c.num_heads * c.head_dim,
               kv = c.num_kv_heads * c.head_dim, inter = c.intermediate_size;
  const double layer_params = hidden * (q + 2 * kv) + q * hidden + 3 * hidden * inter;
  p.matmul_flops = 2.0 * tokens * layer_params * c.num_layers + 2.0 * hidden * c.vocab_size;
  // Causal: token i attends to i + 1 keys; QK^T and PV are 2 * head_dim FLOPs per pair each.
  p.attention_flops = 4.0 * c.head_dim * c.num_heads * c.num_layers *
                      (static_cast<double>(tokens) * (tokens + 1) / 2);
  p.tflops = (p.matmul_flops + p.attention_flops) / p.seconds / 1e12;
  return p;
}

// The prompt-scoring sweep at each batch size on one GPU: a table, and rows for the JSON.
nlohmann::json Scoring(const std::vector<int>& batches, const std::vector<int>& prompts) {
  RankSetup r;
  SetUpRank(r, 0, 1, 0);
  nlohmann::json out = nlohmann::json::array();
  std::printf("prompt scoring (engine loop; plain: prefill + 1 token, scored: prompt_logprobs, "
              "max_tokens 0)\n");
  std::printf("%-4s %-7s %12s %12s %8s %12s\n", "b", "prompt", "plain tok/s", "scored tok/s",
              "steps", "scored/plain");
  for (int b : batches) {
    bench::ScoringSweepOptions o;
    o.batch = b;
    o.prompts = prompts;
    o.block_size = kBlockSize;
    const std::vector<bench::ScoringRow> rows =
        bench::RunScoringSweep(r.model.get(), *r.backend, o);
    for (size_t i = 0; i + 1 < rows.size(); i += 2) {
      const bench::ScoringRow& plain = rows[i];
      const bench::ScoringRow& scored = rows[i + 1];
      std::printf("%-4d %-7d %12.0f %12.0f %8lld %11.3fx\n", b, plain.prompt, plain.tok_s(),
                  scored.tok_s(), static_cast<long long>(scored.steps),
                  scored.tok_s() / plain.tok_s());
      out.push_back({{"batch", b},
                     {"prompt_tokens", plain.prompt},
                     {"plain_tok_s", plain.tok_s()},
                     {"plain_seconds", plain.seconds},
                     {"plain_steps", plain.steps},
                     {"scored_tok_s", scored.tok_s()},
                     {"scored_seconds", scored.seconds},
                     {"scored_steps", scored.steps},
                     {"scored_vs_plain", scored.tok_s() / plain.tok_s()}});
    }
  }
  return out;
}

// The speculative sweep at each batch size on one GPU: a table, and rows for the JSON.
nlohmann::json Speculative(const std::vector<int>& batches, const std::vector<int>& ks,
                           int tokens) {
  RankSetup r;
  SetUpRank(r, 0, 1, 0);
  nlohmann::json out = nlohmann::json::array();
  std::printf("speculative steps (engine loop, greedy, %d tokens a sequence; verify steps eager)\n",
              tokens);
  std::printf("%-4s %-3s %-7s %10s %10s %8s %10s %10s %12s %s\n", "b", "k", "drafter", "tok/s",
              "ms/step", "steps", "accepted", "vs plain", "break-even", "ids");
  for (int b : batches) {
    bench::SpeculativeSweepOptions o;
    o.batch = b;
    o.prompt = kPrompt;
    o.tokens = tokens;
    o.block_size = kBlockSize;
    o.max_len = kMaxLen;
    o.ks = ks;
    const std::vector<bench::SpeculativeRow> rows =
        bench::RunSpeculativeSweep(r.model.get(), *r.backend, o);
    const bench::SpeculativeRow& plain = rows.front();
    for (const bench::SpeculativeRow& row : rows) {
      const double accepted =
          row.draft_tokens > 0 ? static_cast<double>(row.accepted_tokens) / row.draft_tokens : 0;
      // The wrong drafter's step is a verify step of 1 + k rows that keeps one token.
      const double break_even =
          row.drafter == "wrong"
              ? bench::BreakEvenAcceptance(row.k, row.ms_per_step(), plain.ms_per_step())
              : 0;
      // Greedy ids against the plain run's: "=", or the first output position that differs.
      const std::string ids =
          row.ids_equal_plain ? "=" : "from " + std::to_string(row.first_difference);
      char be[32] = "-";
      if (row.drafter == "wrong") std::snprintf(be, sizeof(be), "%.3f", break_even);
      std::printf("%-4d %-3d %-7s %10.1f %10.3f %8lld %9.1f%% %9.3fx %12s %s\n", b, row.k,
                  row.drafter.c_str(), row.tok_s(), row.ms_per_step(),
                  static_cast<long long>(row.steps), 100 * accepted,
                  row.tok_s() / plain.tok_s(), be, ids.c_str());
      nlohmann::json jr = {{"batch", b},
                           {"k", row.k},
                           {"drafter", row.drafter},
                           {"tok_s", row.tok_s()},
                           {"ms_per_step", row.ms_per_step()},
                           {"steps", row.steps},
                           {"tokens", row.tokens},
                           {"seconds", row.seconds},
                           {"draft_tokens", row.draft_tokens},
                           {"accepted_tokens", row.accepted_tokens},
                           {"tok_s_vs_plain", row.tok_s() / plain.tok_s()},
                           {"step_time_vs_plain", row.ms_per_step() / plain.ms_per_step()},
                           {"ids_equal_plain", row.ids_equal_plain},
                           {"first_difference", row.first_difference}};
      if (row.drafter == "wrong") jr["break_even_acceptance"] = break_even;
      out.push_back(jr);
    }
  }
  return out;
}

int Main(int argc, char** argv) {
  const Result<config::Environment> env = config::ReadEnvironment();
  if (!env.ok()) {
    std::fprintf(stderr, "%s\n", env.status().message().c_str());
    return 2;
  }
  config::ApplyKernelSettings(*env);
  CLI::App app{"spark-decode-bench: the CUDA backend end to end on a Qwen3-8B-shaped model"};
  std::vector<int> batches{1, 32};
  int steps = 200, tp = 2, prefill = 8192, port = 29517;
  bool profile = false, tp_nccl = false, tp_only = false, no_fuse_residual = false,
       no_fuse_all_reduce_norm = false;
  std::string json_path, kv_dtype = "bf16", weight_dtype = "bf16";
  app.add_option("--batch", batches, "decode batch sizes")->delimiter(',');
  app.add_option("--steps", steps, "timed decode steps per batch size")->check(CLI::Range(1, 900));
  app.add_option("--tp", tp, "also run tensor parallelism on this many GPUs (1 = skip)")
      ->check(CLI::Range(1, 8));
  app.add_option("--prefill", prefill, "prefill length in tokens (0 = skip)")
      ->check(CLI::Range(0, 32768));
  app.add_option("--port", port, "rendezvous port for the TP run");
  app.add_option("--json", json_path, "write the figures here");
  app.add_option(
      "--kv-dtype", kv_dtype,
      "KV cache elements: bf16 (default, what the engine picks for bf16 weights) or fp32");
  app.add_option("--weight-dtype", weight_dtype,
                 "Linear weights: bf16 (default; what the peer runs) or fp8 (E4M3 with 128 x 128 "
                 "block scales: half the bytes a decode step streams)");
  app.add_flag("--tp-only", tp_only, "only the TP run (skip the one-GPU decode)");
  app.add_flag("--no-fuse-residual", no_fuse_residual,
               "one GPU: the output projections into a buffer, then AddRmsNorm (op by op, as "
               "under tensor parallelism) instead of adding into the residual stream as they "
               "store (ModelOptions::fuse_residual)");
  app.add_flag("--no-fuse-all-reduce-norm", no_fuse_all_reduce_norm,
               "TP with the peer all-reduce: the sum, then AddRmsNorm (two kernels) instead of "
               "one kernel for both (CudaBackend::Options::fuse_all_reduce_norm)");
  bool peer_one_way = false;
  app.add_flag("--peer-one-way", peer_one_way,
               "TP: the peer all-reduce stores each rank's slice straight into the others' "
               "memory and polls the data (one trip over the link) instead of a signal and a read "
               "back (kernels/peer_all_reduce.h)");
  app.add_option("--rank-share", g_rank_share,
                 "time one rank's share of a TP=N step alone: heads, KV heads, intermediate size "
                 "and vocabulary divided by N, no collectives (what TP=N costs a GPU before its "
                 "all-reduces; with --tp 1)")
      ->check(CLI::IsMember({1, 2, 4, 8}));
  app.add_flag("--profile", profile, "also time every op of one eager step per batch size");
  app.add_flag("--tp-nccl", tp_nccl,
               "TP collectives through NCCL with eager steps (default: the peer all-reduce of "
               "GPUs on one host, steps in CUDA graphs)");
  std::vector<int> spec_ks;
  int spec_tokens = 128;
  bool spec_only = false;
  CLI::Option* spec_option =
      app.add_option("--speculative", spec_ks,
                     "also time the engine's speculative step at these draft lengths k, with an "
                     "oracle drafter (all accepted) and an always-wrong one, against plain decode")
          ->delimiter(',')
          ->check(CLI::Range(1, 16));
  app.add_option("--speculative-tokens", spec_tokens, "greedy tokens a sequence in that sweep")
      ->check(CLI::Range(8, 900))
      ->needs(spec_option);
  app.add_flag("--speculative-only", spec_only,
               "only the sweeps --speculative and --scoring ask for (no decode, TP or prefill "
               "runs)");
  std::vector<int> scoring_prompts;
  app.add_option("--scoring", scoring_prompts,
                 "also time the prefill of prompts of these lengths with and without prompt "
                 "scoring (prompt_logprobs), at each --batch; with --speculative-only, instead "
                 "of the decode runs")
      ->delimiter(',')
      ->check(CLI::Range(16, 32768));
  CLI11_PARSE(app, argc, argv);
  if (spec_only && spec_ks.empty() && scoring_prompts.empty()) {
    std::fprintf(stderr,
                 "spark-decode-bench: --speculative-only needs --speculative K,... or --scoring\n");
    return 2;
  }
  g_kv_dtype = Take(backend::ParseDType(kv_dtype), "--kv-dtype");
  g_weight_dtype = Take(backend::ParseDType(weight_dtype), "--weight-dtype");
  g_fuse_residual = !no_fuse_residual;
  g_fuse_all_reduce_norm = !no_fuse_all_reduce_norm;
  g_peer_protocol = peer_one_way ? kernels::PeerProtocol::kOneWay : kernels::PeerProtocol::kSignal;
  if (g_rank_share > 1 && tp > 1) {
    std::fprintf(stderr,
                 "spark-decode-bench: --rank-share times one rank alone; use it with --tp 1\n");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows show as they finish
  int devices = 0;
  Cuda(cudaGetDeviceCount(&devices), "device count");
  cudaDeviceProp prop{};
  Cuda(cudaGetDeviceProperties(&prop, 0), "device properties");

  const bench::GpuCeilings ceil = bench::MeasureGpuCeilings(/*fp8=*/false);
  std::printf("%s: copy %.0f GB/s, bf16 GEMM %.0f TFLOP/s\n", prop.name, ceil.copy_gbs,
              ceil.bf16_tflops);
  nlohmann::json j;
  j["gpu"] = prop.name;
  j["copy_bandwidth_gbs"] = ceil.copy_gbs;
  j["bf16_matmul_peak_tflops"] = ceil.bf16_tflops;
  j["steps"] = steps;
  j["kv_dtype"] = backend::DTypeName(g_kv_dtype);
  j["weight_dtype"] = backend::DTypeName(g_weight_dtype);
  j["fuse_residual"] = g_fuse_residual;
  j["fuse_all_reduce_norm"] = g_fuse_all_reduce_norm;
  j["rank_share"] = g_rank_share;
  j["peer_protocol"] = peer_one_way ? "one-way" : "signal";
  j["gemv_max_rows"] = kernels::GetLaunchSettings().gemv_max_rows;

  if (!spec_ks.empty()) j["speculative"] = Speculative(batches, spec_ks, spec_tokens);
  if (!scoring_prompts.empty()) j["scoring"] = Scoring(batches, scoring_prompts);
  if (spec_only) {
    if (!json_path.empty()) std::ofstream(json_path) << j.dump(2) << "\n";
    return 0;
  }
  int64_t streamed = 0;
  if (profile) Profile(batches, ceil.copy_gbs);
  std::vector<DecodeResult> tp1;
  if (!tp_only) {
    bool graphs = true;
    tp1 = DecodeOnGpus(1, batches, steps, port, false, &streamed, &graphs);
    j["weight_bytes_streamed_per_step"] = streamed;
  }
  std::printf("%-6s %-4s %-6s %12s %12s %10s %12s %10s %8s\n", "tp", "b", "host", "timed tok/s",
              "eager tok/s", "ms/step", "roofline", "gpu ms", "gap us");
  auto report = [&](int world, const std::vector<DecodeResult>& rs, int64_t bytes, bool graphs) {
    for (const DecodeResult& d : rs) {
      const double step_bytes = static_cast<double>(bytes) + d.kv_bytes_per_step / world;
      const double roofline_ms = step_bytes / (ceil.copy_gbs * 1e9) * 1e3;
      const double ratio = roofline_ms / d.graph_ms_per_step;
      std::printf("%-6d %-4d %-6s %12.1f %12.1f %10.3f %11.1f%% %10.3f %8.1f\n", world, d.batch,
                  "waits", d.graph_tok_s, d.eager_tok_s, d.graph_ms_per_step, 100 * ratio,
                  d.gpu_ms_per_step, d.host_gap_us_per_step);
      const double ahead_ratio = d.ahead_ms_per_step > 0 ? roofline_ms / d.ahead_ms_per_step : 0;
      if (d.ahead_ms_per_step > 0) {
        std::printf("%-6d %-4d %-6s %12.1f %12s %10.3f %11.1f%% %10.3f %8.1f\n", world, d.batch,
                    "ahead", d.ahead_tok_s, "-", d.ahead_ms_per_step, 100 * ahead_ratio,
                    d.ahead_gpu_ms_per_step, d.ahead_gap_us_per_step);
      }
      const double engine_ratio = d.engine_ms_per_step > 0 ? roofline_ms / d.engine_ms_per_step : 0;
      if (d.engine_ms_per_step > 0) {
        std::printf(
            "%-6d %-4d %-6s %12.1f %12s %10.3f %11.1f%%  (%lld of %lld launched "
            "ahead taken)\n",
            world, d.batch, "engine", d.engine_tok_s, "-", d.engine_ms_per_step, 100 * engine_ratio,
            static_cast<long long>(d.engine_taken_ahead),
            static_cast<long long>(d.engine_launched_ahead));
      }
      j["decode"].push_back({{"tp", world},
                             {"batch", d.batch},
                             {"graphs", graphs},
                             {"tok_s", d.graph_tok_s},
                             {"eager_tok_s", d.eager_tok_s},
                             {"ms_per_step", d.graph_ms_per_step},
                             {"gpu_ms_per_step", d.gpu_ms_per_step},
                             {"host_gap_us_per_step", d.host_gap_us_per_step},
                             {"ahead_tok_s", d.ahead_tok_s},
                             {"ahead_ms_per_step", d.ahead_ms_per_step},
                             {"ahead_gpu_ms_per_step", d.ahead_gpu_ms_per_step},
                             {"ahead_host_gap_us_per_step", d.ahead_gap_us_per_step},
                             {"ahead_roofline_ratio", ahead_ratio},
                             {"engine_tok_s", d.engine_tok_s},
                             {"engine_ms_per_step", d.engine_ms_per_step},
                             {"engine_roofline_ratio", engine_ratio},
                             {"engine_launched_ahead", d.engine_launched_ahead},
                             {"engine_taken_ahead", d.engine_taken_ahead},
                             {"bytes_per_step_per_gpu", step_bytes},
                             {"roofline_ms_per_step", roofline_ms},
                             {"roofline_ratio", ratio}});
    }
  };
  report(1, tp1, streamed, true);
  if (tp > 1 && devices >= tp) {
    int64_t streamed_tp = 0;  // set by DecodeOnGpus: call it before reading
    bool tp_graphs = false;
    const std::vector<DecodeResult> tpn =
        DecodeOnGpus(tp, batches, steps, port, tp_nccl, &streamed_tp, &tp_graphs);
    report(tp, tpn, streamed_tp, tp_graphs);
    j["tp_graphs"] = tp_graphs;
    j["tp_collectives"] = tp_graphs ? "peer all-reduce" : "nccl";
  } else if (tp > 1) {
    std::printf("tp %d skipped: %d GPU(s)\n", tp, devices);
  }
  if (prefill > 0) {
    const PrefillResult p = RunPrefill(prefill);
    std::printf("prefill %d tokens: %.3f s, %.1f TFLOP/s (%.1f%% of the bf16 GEMM peak)\n",
                p.tokens, p.seconds, p.tflops, 100 * p.tflops / ceil.bf16_tflops);
    j["prefill"] = {{"tokens", p.tokens},
                    {"seconds", p.seconds},
                    {"matmul_flops", p.matmul_flops},
                    {"attention_flops", p.attention_flops},
                    {"tflops", p.tflops},
                    {"vs_matmul_peak", p.tflops / ceil.bf16_tflops}};
  }
  if (!json_path.empty()) std::ofstream(json_path) << j.dump(2) << "\n";
  return 0;
}

}  // namespace
}  // namespace spark::engine

int main(int argc, char** argv) { return spark::engine::Main(argc, argv); }
