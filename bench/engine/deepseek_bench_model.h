// The DeepSeek-V4.1-Flash-shaped model of spark-deepseek-bench: the released widths (hidden 5120,
// 64 heads x 512, q_lora 1280, 384 experts of 2304, top-6, one shared expert, o_groups 8, indexer
// 32 x 128, hc_mult 4, window 128, index_topk 512, candidate blocks of 8 keeping 2048) on a
// short schedule of the released layer kinds, with random weights in the released types (FP8
// E4M3 + UE8M0 per 32 x 32, FP4 E2M1 experts + UE8M0 per 1 x 32, bf16 and fp32 where the
// release keeps them), built in host memory (no checkpoint files) and handed to the model as
// the loader would. And the model of what each decode step must read and each prefill token
// must compute, which the benchmark's ratios divide by.
// Thread-safety: plain functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/core/model_config.h"
#include "engine/model/deepseek_v41/dspark_weights.h"
#include "engine/model/deepseek_v41/weights.h"

namespace spark::bench {

// The bench schedule: which released layer kind each layer is (as engine/model/deepseek_v41
// names them: window-only; a ratio-2 KV and index source, with Engram; a ratio-2 reuser; the
// ratio-1 KV, index and candidate source; a ratio-1 reuser that scores its own top-k).
struct BenchLayer {
  int ratio = 0;
  bool kv_source = false, index_source = false, candidate_source = false, engram = false;
  std::string kind;  // for tables
};
std::vector<BenchLayer> BenchSchedule();
// The released 40-layer schedule of V4.1-Flash (compress_ratios [0,0]+[2]x18+[1]x20, KV sources
// 2, 8, 14, 20, index sources 2, 8, ..., 36, candidate source 20, Engram at 1 and 14), for the
// whole-model projection.
std::vector<BenchLayer> FlashSchedule();

// config.json of the bench model (flat deepseek_v41_text form) and its parsed ModelConfig, the
// Engram table rows set to what its hashing needs; with `draft_layers`, a DSpark stack of that
// many stages and the reference's defaults for the other dspark_* fields.
Result<engine::core::ModelConfig> BenchConfig(int engram_vocab_size, int draft_layers = 0);

// Random weights of `config` in the released types (one random block of 64 MiB tiled over each
// tensor, so building them takes seconds); the Engram tables live in `tables` (host memory the
// returned weights point into, owned by the caller).
struct EngramTables {
  std::vector<engine::model::dsv4::RawTensor> weight, scale;
  std::vector<std::vector<uint8_t>> bytes;
};
Result<engine::model::dsv41::Weights> BenchWeights(const engine::core::ModelConfig& config,
                                                   const engine::model::dsv41::EngramHashing& h,
                                                   EngramTables* tables);

// What one decode step of `batch` sequences at context `context` must read per layer, at the
// model's own storage precision (weights as released; window KV FP8, compressed entries FP4 with
// E4M3 scales per 16, indexer keys FP4 with UE8M0 per 32; routed experts: the expected distinct
// experts of uniform routing), and FLOPs per prefill token.
struct StepBytes {
  double weights = 0, routed = 0, kv = 0, engram_rows = 0;
  // Of `weights`, what tensor parallelism splits across ranks (wq_b, wo_a, wo_b, the shared
  // expert); the rest (latents, mHC, compressor, indexer, router, Engram) every rank reads, as
  // it reads the KV and the Engram rows. Routed experts are split too.
  double sharded = 0;
  double total() const { return weights + routed + kv + engram_rows; }
};
StepBytes DecodeBytes(const engine::core::ModelConfig& c, const BenchLayer& layer, int batch,
                      int64_t context);
// A random DSpark stack for `c` (num_nextn_predict_layers stages, DraftConfig's experts) in the
// released types, as LoadDraftWeights would hand it to the model; Markov factors in fp32 (the
// backend keeps them as it keeps other float matrices).
Result<engine::model::dsv41::DraftWeights> BenchDraftWeights(const engine::core::ModelConfig& c);

// What one DSpark draft of `blocks` blocks (dspark.h) must read, by the same model: the stack's
// window-only blocks over blocks x dspark_block_size tokens (its own expert count and top-k),
// the target's LM head for those rows, markov_head.head (bf16, vocabulary-parallel like the
// head) once per block position; and, per target step, the context keys' main_proj and each
// stage's wkv (replicated).
struct DraftBytes {
  int blocks = 0, tokens = 0;
  StepBytes stack;
  double head = 0, markov = 0, context_per_step = 0;
};
DraftBytes DsparkDraftBytes(const engine::core::ModelConfig& c, int blocks);

// Bytes of the LM head and embedding rows per decode step.
double HeadBytes(const engine::core::ModelConfig& c, int batch);
// Matmul and attention FLOPs of one prefill token at `position` (indexer scoring included).
double PrefillFlops(const engine::core::ModelConfig& c, const BenchLayer& layer, int64_t position);

}  // namespace spark::bench
