// spark-deepseek-bench: DeepSeek-V4.1-Flash-shaped layers (deepseek_bench_model.h) on one GPU,
// weights in the released types on the CUDA backend, TP=1:
//   - decode ms per step and per layer at each --batch and --context, against the bytes the step
//     must read (the model's storage precision) at the copy bandwidth measured in the same run;
//   - prefill tok/s of one --prefill sequence (chunks of --chunk tokens), against the FP8 and
//     bf16 GEMM peaks measured in the same run;
//   - Engram row bytes and gather time per decode step; memory per layer;
//   - with --dspark, a DSpark draft stack too: decode steps with its context keys and one draft
//     of 1 and 8 blocks against the bytes the draft reads.
// The KV state of a decode context is filled with random values instead of prefilled (the
// timing does not depend on what it holds). Prints a table; --json writes the figures
// (bench/engine/deepseek_v41_cuda.sh adds the projection, DEEPSEEK_V41_NOTES.md says how).
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "bench/engine/deepseek_bench_model.h"
#include "bench/engine/gpu_ceilings.h"
#include "bench/engine/timing_deepseek_ops.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/model/deepseek_v41/deepseek_v41_model.h"
#include "engine/model/forward_batch.h"
#include "engine/model/kv_cache.h"
#include "kernels/elementwise.h"
#include "kernels/fp8.h"
#include "kernels/gemm.h"

namespace spark::bench {
namespace {

namespace dsv41 = engine::model::dsv41;
using engine::backend::cuda::CudaBackend;
using Clock = std::chrono::steady_clock;

constexpr int kBlockSize = 64;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "spark-deepseek-bench: %s\n", what.c_str());
  std::exit(1);
}
void Check(const Status& s, const char* what) {
  if (!s.ok()) Die(std::string(what) + ": " + s.message());
}
template <typename T>
T Take(Result<T> r, const char* what) {
  Check(r.status(), what);
  return std::move(*r);
}
void Cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) Die(std::string(what) + ": " + cudaGetErrorString(e));
}
double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::vector<int> ParseList(const std::string& text) {
  std::vector<int> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t comma = text.find(',', at);
    out.push_back(std::stoi(text.substr(at, comma - at)));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

// A cache for `sequences` sequences of up to `tokens` tokens each, its blocks handed out in order,
// filled with random values in [0, 1) (the Engram id field reads as token 0).
struct Cache {
  engine::model::PagedKvCache cache;
  std::vector<std::vector<int32_t>> tables;
};

Result<Cache> MakeCache(CudaBackend& gpu, const engine::model::KvCacheSpec& spec, int sequences,
                        int64_t tokens) {
  const int64_t per = (tokens + kBlockSize - 1) / kBlockSize;
  SPARK_ASSIGN_OR_RETURN(
      auto cache, engine::model::PagedKvCache::Create(gpu, spec, per * sequences, kBlockSize));
  Cache c{std::move(cache), {}};
  for (int s = 0; s < sequences; ++s) {
    std::vector<int32_t>& t = c.tables.emplace_back();
    for (int64_t b = 0; b < per; ++b) t.push_back(static_cast<int32_t>(s * per + b));
  }
  const size_t slots = static_cast<size_t>(per * sequences * kBlockSize);
  for (int l = 0; l < spec.num_layers; ++l) {
    SPARK_RETURN_IF_ERROR(kernels::FillUniform(c.cache.k(l), slots * spec.width(l), 100 + l, 0.0f,
                                               1.0f, gpu.stream()));
    if (spec.v_width(l) == 0) continue;
    SPARK_RETURN_IF_ERROR(kernels::FillUniform(c.cache.v(l), slots * spec.v_width(l), 200 + l,
                                               0.0f, 1.0f, gpu.stream()));
  }
  SPARK_RETURN_IF_ERROR(gpu.Synchronize());
  return c;
}

struct DecodeRow {
  int batch = 0;
  int64_t context = 0;
  bool measured = false;
  std::string why;  // when not measured
  double ms_step = 0, ms_head = 0, bytes = 0, bytes_per_layer = 0, kv_bytes = 0;
  double tok_s() const { return batch / (ms_step * 1e-3); }
};

// ms of the LM head (bf16 [vocab, hidden]) alone for `batch` rows: taken out of the step to give
// the layers' share.
double HeadMs(CudaBackend& gpu, const engine::core::ModelConfig& c, int batch) {
  auto head =
      Take(gpu.AllocateMatrix(c.vocab_size, c.hidden_size, engine::backend::DType::kBF16), "head");
  auto x = Take(gpu.Allocate(static_cast<size_t>(batch) * c.hidden_size), "x");
  auto y = Take(gpu.Allocate(static_cast<size_t>(batch) * c.vocab_size), "y");
  return engine::bench::MedianMs(gpu.stream(), 10, [&] {
    gpu.Linear(x.data(), batch, c.hidden_size, head.weight(), c.vocab_size, y.data());
  });
}

DecodeRow Decode(CudaBackend& gpu, engine::model::Model& model, const std::vector<BenchLayer>& s,
                 int batch, int64_t context, int steps,
                 const std::function<void()>& after_warmup = {}) {
  const engine::core::ModelConfig& c = model.config();
  DecodeRow row{batch, context};
  const engine::model::KvCacheSpec spec = model.kv_cache_spec();
  const int64_t tokens = context + steps + 2;
  const double cache_bytes = static_cast<double>(batch) * ((tokens + kBlockSize - 1) / kBlockSize) *
                             kBlockSize * spec.bytes_per_token();
  size_t free = 0, total = 0;
  Cuda(cudaMemGetInfo(&free, &total), "meminfo");
  if (cache_bytes + (double{8} * (1 << 30)) > static_cast<double>(free)) {
    row.why = "the fp32 KV record needs " + std::to_string(cache_bytes / (1 << 30)) + " GiB, " +
              std::to_string(free / (1 << 30)) + " GiB free";
    return row;
  }
  Cache cache = Take(MakeCache(gpu, spec, batch, tokens), "cache");
  std::vector<int32_t> ids(batch);
  for (int i = 0; i < batch; ++i) ids[i] = 1000 + 37 * i;
  auto step = [&](int64_t cached) {
    engine::model::ForwardBatch b;
    for (int i = 0; i < batch; ++i) {
      b.AddSequence(std::span(&ids[i], 1), cached, cache.tables[i], kBlockSize);
    }
    std::vector<float> logits;
    Check(model.Forward(b, cache.cache, &logits), "decode step");
  };
  step(context);  // warm-up: expert tables, RoPE tables, allocator
  if (after_warmup) after_warmup();
  const Clock::time_point t0 = Clock::now();
  for (int k = 1; k <= steps; ++k) step(context + k);
  row.ms_step = Seconds(t0, Clock::now()) * 1e3 / steps;
  row.ms_head = HeadMs(gpu, c, batch);
  for (const BenchLayer& l : s) {
    const StepBytes b = DecodeBytes(c, l, batch, context);
    row.bytes_per_layer += b.total();
    row.kv_bytes += b.kv;
  }
  row.bytes = row.bytes_per_layer + HeadBytes(c, batch);
  row.bytes_per_layer /= static_cast<double>(s.size());
  row.measured = true;
  return row;
}

struct PrefillRow {
  int64_t tokens = 0;
  bool measured = false;
  std::string why;
  double seconds = 0, flops = 0;
};

PrefillRow Prefill(CudaBackend& gpu, engine::model::Model& model, const std::vector<BenchLayer>& s,
                   int64_t tokens, int chunk, const std::function<void()>& after_warmup = {}) {
  const engine::core::ModelConfig& c = model.config();
  PrefillRow row{tokens};
  Cache cache = Take(MakeCache(gpu, model.kv_cache_spec(), 1, tokens + 1), "cache");
  std::mt19937 rng(5);
  std::vector<int32_t> ids(tokens);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % 120000);
  auto run = [&](int64_t count) {
    for (int64_t done = 0; done < count; done += chunk) {
      const int64_t n = std::min<int64_t>(chunk, count - done);
      engine::model::ForwardBatch b;
      b.AddSequence(std::span(ids).subspan(done, n), done, cache.tables[0], kBlockSize);
      std::vector<float> logits;
      Check(model.Forward(b, cache.cache, &logits), "prefill chunk");
    }
  };
  run(std::min<int64_t>(chunk, tokens));  // warm-up
  if (after_warmup) after_warmup();
  const Clock::time_point t0 = Clock::now();
  run(tokens);
  row.seconds = Seconds(t0, Clock::now());
  for (int64_t p = 0; p < tokens; ++p) {
    for (const BenchLayer& l : s) row.flops += PrefillFlops(c, l, p);
  }
  row.flops += 2.0 * c.vocab_size * c.hidden_size * ((tokens + chunk - 1) / chunk);  // last rows
  row.measured = true;
  return row;
}

// ms of one DSpark draft of `blocks` blocks (one per sequence, anchors at `context`) over random
// context keys, the median of `steps` after a warm-up; drafts end with their ids on the host.
double DraftMs(CudaBackend& gpu, engine::model::Model& model, int blocks, int64_t context,
               int steps) {
  const int count = model.config().dsv41.dspark_block_size;
  Cache cache = Take(MakeCache(gpu, model.kv_cache_spec(), blocks, context + count + 1), "cache");
  std::vector<engine::model::DraftBlock> draft;
  for (int k = 0; k < blocks; ++k) {
    draft.push_back({1000 + 37 * k, static_cast<int32_t>(context), cache.tables[k], count});
  }
  std::vector<std::vector<int32_t>> ids;
  Check(model.DraftTokens(draft, cache.cache, &ids), "draft");  // warm-up
  std::vector<double> ms;
  for (int i = 0; i < steps; ++i) {
    const Clock::time_point t0 = Clock::now();
    Check(model.DraftTokens(draft, cache.cache, &ids), "draft");
    ms.push_back(Seconds(t0, Clock::now()) * 1e3);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Host gather of one decode step's Engram rows (24 per token, the random ids a step would hash
// to) and their upload, as Engram::Apply does it: ms per step.
double EngramMs(CudaBackend& gpu, const dsv41::EngramTable& table, int batch, int columns) {
  std::mt19937_64 rng(9);
  std::vector<int64_t> rows(static_cast<size_t>(batch) * columns);
  std::vector<float> host(rows.size() * table.dim());
  auto device = Take(gpu.Allocate(host.size()), "engram rows");
  std::vector<double> ms;
  for (int rep = 0; rep < 21; ++rep) {
    for (int64_t& r : rows) r = static_cast<int64_t>(rng() % table.rows());
    const Clock::time_point t0 = Clock::now();
    table.Gather(rows, host.data());
    gpu.Upload(host, device.data());
    ms.push_back(Seconds(t0, Clock::now()) * 1e3);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Bytes one decode step of the released 40-layer V4.1-Flash must read at TP=1 (FlashSchedule),
// per batch and context: what the projection scales by the measured efficiency.
nlohmann::json FlashBytes(const engine::core::ModelConfig& c, const std::vector<int>& batches,
                          const std::vector<int>& contexts) {
  nlohmann::json out = nlohmann::json::array();
  for (int b : batches) {
    for (int ctx : contexts) {
      StepBytes sum;
      for (const BenchLayer& l : FlashSchedule()) {
        const StepBytes x = DecodeBytes(c, l, b, ctx);
        sum.weights += x.weights, sum.routed += x.routed, sum.kv += x.kv;
        sum.engram_rows += x.engram_rows, sum.sharded += x.sharded;
      }
      out.push_back({{"batch", b},
                     {"context", ctx},
                     {"layer_weights", sum.weights},
                     {"layer_weights_sharded", sum.sharded},
                     {"routed_experts", sum.routed},
                     {"kv", sum.kv},
                     {"engram_rows", sum.engram_rows},
                     {"head", HeadBytes(c, b)},
                     {"total", sum.total() + HeadBytes(c, b)}});
    }
  }
  return out;
}

// FLOPs of a whole prompt of each length through the released 40 layers and the head of its
// last token.
nlohmann::json FlashPrefillFlops(const engine::core::ModelConfig& c,
                                 const std::vector<int64_t>& lengths) {
  nlohmann::json out = nlohmann::json::array();
  const std::vector<BenchLayer> layers = FlashSchedule();
  for (int64_t n : lengths) {
    double flops = 2.0 * c.vocab_size * c.hidden_size;
    for (int64_t p = 0; p < n; ++p) {
      for (const BenchLayer& l : layers) flops += PrefillFlops(c, l, p);
    }
    out.push_back({{"tokens", n}, {"flops", flops}});
  }
  return out;
}

// Bytes of one DSpark draft (DsparkDraftBytes) of 1 and 8 blocks: the draft cost the
// projection adds to a speculative step.
nlohmann::json DsparkBytes(const engine::core::ModelConfig& c) {
  nlohmann::json out = nlohmann::json::array();
  for (int blocks : {1, 8}) {
    const DraftBytes d = DsparkDraftBytes(c, blocks);
    out.push_back({{"blocks", d.blocks},
                   {"tokens", d.tokens},
                   {"stages", c.dsv41.num_nextn_predict_layers},
                   {"layer_weights", d.stack.weights},
                   {"layer_weights_sharded", d.stack.sharded},
                   {"routed_experts", d.stack.routed},
                   {"kv", d.stack.kv},
                   {"head", d.head},
                   {"markov_head", d.markov},
                   {"context_per_target_step", d.context_per_step}});
  }
  return out;
}

int Main(int argc, char** argv) {
  CLI::App app{
      "DeepSeek-V4.1-Flash-shaped layers on one GPU: decode and prefill against the "
      "bytes and FLOPs they need, at the copy bandwidth and GEMM peaks measured here"};
  std::string batches = "1,8,32", contexts = "4096,65536", prefills = "8192,65536", json;
  int steps = 8, chunk = 8192, engram_vocab = 400000;
  bool precise = false, describe = false, profile = false, dspark = false;
  app.add_option("--batch", batches, "decode batch sizes (comma-separated)");
  app.add_option("--context", contexts, "decode contexts in tokens");
  app.add_option("--prefill", prefills, "prefill lengths in tokens (0: none)");
  app.add_option("--steps", steps, "timed decode steps per point");
  app.add_option("--chunk", chunk, "prefill chunk in tokens");
  app.add_option("--engram-vocab", engram_vocab,
                 "engram_vocab_size of the bench model (its tables' rows follow: ~24 x this)");
  app.add_flag("--precise", precise, "CudaBackend precise_quant (activations at fp32 accuracy)");
  app.add_option("--json", json, "write the figures here");
  app.add_flag("--profile", profile,
               "time every op of one decode step per --batch (first --context) and one prefill "
               "chunk (GPU time, waiting after each op), print the tables, then exit");
  app.add_flag("--dspark", dspark,
               "add a random 3-stage DSpark stack (128 experts top 3, released types): time decode "
               "steps with its context keys at each --batch (first --context) and one draft of 1 "
               "and 8 blocks against the bytes it reads, write them under \"dspark\", then exit");
  app.add_flag("--describe", describe,
               "print the bench model and the bytes each decode step and DSpark draft must read "
               "(the bench schedule and the released 40-layer one), write them to --json, then "
               "exit: no GPU needed");
  app.footer("Example: spark-deepseek-bench --batch 1,8,32 --context 4096,65536 --json out.json");
  CLI11_PARSE(app, argc, argv);

  engine::core::ModelConfig config = Take(BenchConfig(engram_vocab), "config");
  std::vector<int32_t> token_map(config.vocab_size);
  for (int i = 0; i < config.vocab_size; ++i) {
    token_map[i] = i % config.dsv41.engram_compressed_vocab_size;
  }
  auto hashing = std::make_unique<dsv41::EngramHashing>(
      Take(dsv41::EngramHashing::Create(config.dsv41, token_map[config.dsv41.engram_pad_id]),
           "hashing"));
  config.dsv41.engram_num_embeddings = {hashing->RowsNeeded(0)};
  const std::vector<BenchLayer> schedule = BenchSchedule();
  nlohmann::json j;
  j["flash_bytes_per_step"] = FlashBytes(config, ParseList(batches), ParseList(contexts));
  j["flash_prefill_flops"] = FlashPrefillFlops(config, {8192, 65536, 1 << 20});
  j["dspark_draft_bytes"] = DsparkBytes(Take(BenchConfig(engram_vocab, 3), "draft config"));
  if (describe) {
    std::printf("bench layers:\n");
    for (const BenchLayer& l : schedule) {
      const StepBytes b = DecodeBytes(config, l, 1, ParseList(contexts).front());
      std::printf("  %-40s b1: weights %.3g + routed %.3g + kv %.3g + engram rows %.3g bytes\n",
                  l.kind.c_str(), b.weights, b.routed, b.kv, b.engram_rows);
    }
    std::printf("Engram table rows: %lld\n%s\n", static_cast<long long>(hashing->RowsNeeded(0)),
                j.dump(2).c_str());
    if (!json.empty()) {
      j["kind"] = "computed byte and FLOP model (--describe): nothing measured";
      std::ofstream(json) << j.dump(2) << "\n";
      std::printf("wrote %s\n", json.c_str());
    }
    return 0;
  }
  cudaDeviceProp prop{};
  Cuda(cudaGetDeviceProperties(&prop, 0), "device");
  const engine::bench::GpuCeilings ceil = engine::bench::MeasureGpuCeilings(/*fp8=*/true);
  std::printf("%s: copy %.0f GB/s, bf16 GEMM %.0f TFLOP/s, FP8 GEMM %.0f TFLOP/s\n", prop.name,
              ceil.copy_gbs, ceil.bf16_tflops, ceil.fp8_tflops);

  auto gpu = Take(
      CudaBackend::Create({.step_timeout = std::chrono::seconds(600), .precise_quant = precise}),
      "cuda backend");
  Clock::time_point t0 = Clock::now();
  EngramTables tables;
  dsv41::Weights weights = Take(BenchWeights(config, *hashing, &tables), "weights");
  const dsv41::EngramTable engram_table = weights.engram.front().table;
  const double build_s = Seconds(t0, Clock::now());
  t0 = Clock::now();
  engine::bench::TimingBackend timing(*gpu);
  engine::bench::TimingDeepseekOps timed_ops(*gpu->deepseek_ops(), timing);
  timing.set_deepseek_ops(&timed_ops);
  engine::backend::Backend& backend = profile ? static_cast<engine::backend::Backend&>(timing)
                                              : static_cast<engine::backend::Backend&>(*gpu);
  std::optional<dsv41::DraftWeights> draft;
  engine::core::ModelConfig model_config = config;
  if (dspark) {
    model_config = Take(BenchConfig(engram_vocab, 3), "draft config");
    model_config.dsv41.engram_num_embeddings = config.dsv41.engram_num_embeddings;
    draft = Take(BenchDraftWeights(model_config), "draft weights");
  }
  dsv41::DeepseekV41Model model(model_config, nullptr, std::move(weights), std::move(hashing),
                                token_map, backend, nullptr, std::move(draft));
  Check(gpu->Synchronize(), "upload");
  const double upload_s = Seconds(t0, Clock::now());
  const size_t weight_bytes = gpu->bytes_in_use();
  std::printf(
      "model: %zu layers, %.1f GiB of weights on the GPU (built in %.1f s, uploaded in "
      "%.1f s); KV record %lld bytes per token\n",
      schedule.size(), weight_bytes / double(1 << 30), build_s, upload_s,
      static_cast<long long>(model.kv_cache_spec().bytes_per_token()));

  if (profile) {
    for (int b : ParseList(batches)) {
      const DecodeRow r =
          Decode(*gpu, model, schedule, b, ParseList(contexts).front(), 1, [&] { timing.Clear(); });
      std::printf("\n== decode step, batch %d, context %d (%.3f ms with a wait after each op)\n", b,
                  ParseList(contexts).front(), r.ms_step);
      timing.Print(ceil.copy_gbs);
    }
    const PrefillRow p = Prefill(*gpu, model, schedule, chunk, chunk, [&] { timing.Clear(); });
    std::printf("\n== prefill of %d tokens (one chunk, %.3f s)\n", chunk, p.seconds);
    timing.Print(ceil.copy_gbs);
    return 0;
  }
  if (dspark) {
    const int64_t ctx = ParseList(contexts).front();
    std::printf("\n%-22s %8s %10s %14s %10s\n", "DSpark", "context", "ms", "bytes", "roofline");
    for (int b : ParseList(batches)) {
      const DecodeRow r = Decode(*gpu, model, schedule, b, ctx, steps);
      if (!r.measured) Die("decode with DSpark context: " + r.why);
      std::printf("%-22s %8lld %10.3f\n", ("decode step, batch " + std::to_string(b)).c_str(),
                  static_cast<long long>(ctx), r.ms_step);
      j["dspark"]["decode_with_context"].push_back(
          {{"batch", b}, {"context", ctx}, {"ms_per_step", r.ms_step}});
    }
    for (int blocks : {1, 8}) {
      const double ms = DraftMs(*gpu, model, blocks, ctx, steps);
      const DraftBytes d = DsparkDraftBytes(model_config, blocks);
      const double bytes = d.stack.weights + d.stack.routed + d.stack.kv + d.head + d.markov;
      const double ratio = bytes / (ceil.copy_gbs * 1e9) / (ms * 1e-3);
      std::printf("%-22s %8lld %10.3f %14.3g %10.3f\n",
                  ("draft, " + std::to_string(blocks) + " block(s)").c_str(),
                  static_cast<long long>(ctx), ms, bytes, ratio);
      j["dspark"]["draft"].push_back({{"blocks", blocks},
                                      {"tokens", d.tokens},
                                      {"context", ctx},
                                      {"ms_per_draft", ms},
                                      {"bytes", bytes},
                                      {"roofline_ratio", ratio}});
    }
    j["gpu"] = prop.name;
    j["copy_bandwidth_gbs"] = ceil.copy_gbs;
    if (!json.empty()) {
      std::ofstream(json) << j.dump(2) << "\n";
      std::printf("wrote %s\n", json.c_str());
    }
    return 0;
  }
  j["gpu"] = prop.name;
  j["copy_bandwidth_gbs"] = ceil.copy_gbs;
  j["bf16_gemm_peak_tflops"] = ceil.bf16_tflops;
  j["fp8_gemm_peak_tflops"] = ceil.fp8_tflops;
  j["precise_quant"] = precise;
  j["steps"] = steps;
  j["weight_bytes"] = weight_bytes;
  j["weight_bytes_per_layer"] = static_cast<double>(weight_bytes) / schedule.size();
  j["kv_record_bytes_per_token"] = model.kv_cache_spec().bytes_per_token();
  for (const BenchLayer& l : schedule) j["layers"].push_back(l.kind);

  std::printf("\n%-6s %-8s %10s %10s %12s %14s %10s\n", "batch", "context", "ms/step", "ms/layer",
              "tok/s", "bytes/layer", "roofline");
  for (int b : ParseList(batches)) {
    for (int ctx : ParseList(contexts)) {
      const DecodeRow r = Decode(*gpu, model, schedule, b, ctx, steps);
      nlohmann::json row = {{"batch", b}, {"context", ctx}, {"measured", r.measured}};
      if (!r.measured) {
        std::printf("%-6d %-8d not measured: %s\n", b, ctx, r.why.c_str());
        row["why"] = r.why;
        j["decode"].push_back(row);
        continue;
      }
      const double layer_ms = (r.ms_step - r.ms_head) / schedule.size();
      const double ratio = r.bytes / (ceil.copy_gbs * 1e9) / (r.ms_step * 1e-3);
      std::printf("%-6d %-8d %10.3f %10.3f %12.1f %14.3g %10.3f\n", b, ctx, r.ms_step, layer_ms,
                  r.tok_s(), r.bytes_per_layer, ratio);
      row.update({{"ms_per_step", r.ms_step},
                  {"ms_head", r.ms_head},
                  {"ms_per_layer", layer_ms},
                  {"tok_s", r.tok_s()},
                  {"bytes_per_step", r.bytes},
                  {"bytes_per_layer", r.bytes_per_layer},
                  {"kv_bytes_per_step", r.kv_bytes},
                  {"roofline_ratio", ratio}});
      j["decode"].push_back(row);
      if (ctx == ParseList(contexts).front()) {
        j["decode_b" + std::to_string(b) + "_roofline_ratio"] = ratio;
      }
    }
  }
  std::printf("\n%-8s %10s %12s %12s %10s %10s\n", "prefill", "seconds", "tok/s", "TFLOP/s",
              "vs FP8", "vs bf16");
  for (int p : ParseList(prefills)) {
    if (p <= 0) continue;
    const PrefillRow r = Prefill(*gpu, model, schedule, p, chunk);
    const double tflops = r.flops / r.seconds / 1e12;
    const double vs_fp8 = ceil.fp8_tflops > 0 ? tflops / ceil.fp8_tflops : 0;
    std::printf("%-8d %10.2f %12.1f %12.1f %10.3f %10.3f\n", p, r.seconds, p / r.seconds, tflops,
                vs_fp8, tflops / ceil.bf16_tflops);
    j["prefill"].push_back({{"tokens", p},
                            {"seconds", r.seconds},
                            {"tok_s", p / r.seconds},
                            {"flops", r.flops},
                            {"tflops", tflops},
                            {"vs_fp8_peak", vs_fp8},
                            {"vs_bf16_peak", tflops / ceil.bf16_tflops}});
    if (!j.contains("prefill_vs_fp8_peak")) j["prefill_vs_fp8_peak"] = vs_fp8;
  }
  const int columns = (config.dsv41.engram_max_ngram_size - 1) * config.dsv41.engram_n_heads;
  std::printf("\n%-6s %14s %12s (Engram, one layer, host gather + upload)\n", "batch", "bytes/step",
              "ms/step");
  for (int b : ParseList(batches)) {
    const double bytes =
        static_cast<double>(b) * columns * (config.dsv41.engram_head_dim * (1 + 1.0 / 32));
    const double ms = EngramMs(*gpu, engram_table, b, columns);
    std::printf("%-6d %14.0f %12.3f\n", b, bytes, ms);
    j["engram"].push_back({{"batch", b}, {"row_bytes_per_step", bytes}, {"ms_per_step", ms}});
  }
  if (!json.empty()) {
    std::ofstream(json) << j.dump(2) << "\n";
    std::printf("wrote %s\n", json.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace spark::bench

int main(int argc, char** argv) { return spark::bench::Main(argc, argv); }
