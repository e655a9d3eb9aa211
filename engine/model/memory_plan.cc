#include "engine/model/memory_plan.h"

#include <algorithm>
#include <cmath>

#include "base/strings.h"

namespace spark::engine::model {
namespace {

// The engine process around the model: code, the tokenizer's tables, thread stacks, HTTP
// buffers. Measured: 45 MiB VmRSS for `serve` with the Qwen3 tokenizer on the CPU backend before
// it loads the weights, and ~4 MiB more while serving (bench/memory/NOTES.md); planned with room
// to spare.
constexpr int64_t kEngineProcessBytes = 256 * kMiB;
// The same on the CUDA backend: the driver's and runtime's host mappings and pinned staging come
// on top (547 MiB peak VmHWM serving Qwen3-8B on an H200, bench/memory/NOTES.md). On a GB10 host
// and device memory are one pool, so this counts there.
constexpr int64_t kCudaEngineProcessBytes = 640 * kMiB;
// The CUDA context, loaded kernel modules and cuBLASLt's workspace: an estimate that, with the
// graph arena, put the H200's device memory within 1% of the plan (bench/memory/NOTES.md); not
// measured on a GB10 yet.
constexpr int64_t kCudaRuntimeBytes = 1 * kGiB;
// NCCL's pinned buffers per rank (FIELD_NOTES, field figures on Sparks): 4.7 GiB at NCCL's
// defaults, 0.14 GiB with NCCL_BUFFSIZE=1MiB, LL128 off (NCCL_PROTO=^LL128) and
// NCCL_MAX_NCHANNELS=8.
constexpr int64_t kNcclDefaultBytes = static_cast<int64_t>(4.7 * kGiB);
constexpr int64_t kNcclTunedBytes = static_cast<int64_t>(0.14 * kGiB);
// The CUDA backend's graph arena grows in chunks of this size
// (engine/backend/cuda/device_memory.cc).
constexpr int64_t kGraphArenaChunk = 64 * kMiB;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// NCCL_BUFFSIZE's bytes (a plain number, as NCCL reads it); -1 when empty or not a number.
int64_t ParseBytes(const std::string& text) {
  if (text.empty()) return -1;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 0);
  return end && *end == '\0' && v > 0 ? v : -1;
}

PlanItem NcclBuffers(const PlanRequest& r) {
  const int64_t buffsize = ParseBytes(r.nccl_buffsize);
  const int64_t channels = ParseBytes(r.nccl_max_nchannels);
  const bool tuned = buffsize > 0 && buffsize <= kMiB && channels > 0 && channels <= 8 &&
                     r.nccl_proto.find("^LL128") != std::string::npos;
  if (tuned) {
    return {"nccl buffers", kNcclTunedBytes,
            "field figure with NCCL_BUFFSIZE<=1MiB, NCCL_PROTO=^LL128, NCCL_MAX_NCHANNELS<=8"};
  }
  return {"nccl buffers", kNcclDefaultBytes,
          "field figure at NCCL's defaults (0.14 GiB with NCCL_BUFFSIZE=1048576, "
          "NCCL_PROTO=^LL128, NCCL_MAX_NCHANNELS=8)"};
}

// Bytes as GiB with two decimals ("4.7").
std::string Gib(int64_t bytes) {
  return FormatNumber(std::round(static_cast<double>(bytes) / static_cast<double>(kGiB) * 100) /
                      100);
}

}  // namespace

Status MemoryFloors::Validate() const {
  if (hard < 0 || admit < hard || startup < admit) {
    return InvalidArgumentError("memory floors must satisfy 0 <= hard (" + Gib(hard) +
                                " GiB) <= admit (" + Gib(admit) + " GiB) <= start-up (" +
                                Gib(startup) + " GiB)");
  }
  return Status::Ok();
}

int64_t DefaultKvBlocks(int max_num_seqs, int64_t max_model_len, int block_size) {
  return std::min<int64_t>(4096, int64_t{max_num_seqs} * CeilDiv(max_model_len, block_size));
}

std::string_view KnobName(Knob knob) {
  switch (knob) {
    case Knob::kNone:
      return "none";
    case Knob::kKvTokens:
      return "kv_tokens";
    case Knob::kKvFraction:
      return "kv_memory_fraction";
    case Knob::kTp:
      return "tp";
  }
  return "?";
}

namespace {

// The weights and KV cache per token: the element types held on a backend that runs the family,
// else the family's serving layout (projected). Sets the layout fields of `plan`.
Result<MemoryFootprint> Footprint(const core::ModelConfig& config, const ModelFamily& family,
                                  const PlanRequest& r, const MemoryQuery& query, RankPlan* plan) {
  const bool runs =
      std::find(family.backends.begin(), family.backends.end(), r.backend) != family.backends.end();
  if (runs) {
    plan->layout_note = std::string("held: weights ") + backend::DTypeName(r.weight_dtype) +
                        ", KV cache " + backend::DTypeName(r.kv_dtype) + " on " + r.backend;
    return family.memory(config, query);
  }
  if (family.serving_memory == nullptr) {
    return UnimplementedError(std::string(family.name) + " does not run on the " + r.backend +
                              " backend and has no serving layout to plan with");
  }
  plan->serving_layout = true;
  plan->layout_note = "projected: this build runs " + std::string(family.name) + " on " +
                      std::string(family.backends.front()) +
                      " only; weights and KV cache in the released checkpoint's storage types "
                      "(the serving layout)";
  return family.serving_memory(config, query);
}

// What the serving process adds around the model: the transport's buffers, the CUDA runtime and
// the engine process.
void AddProcessItems(const core::ModelConfig& config, const PlanRequest& r, const StepShape& step,
                     RankPlan* plan) {
  const bool cuda = r.backend == "cuda";
  if (r.tp > 1 && cuda) plan->fixed.push_back(NcclBuffers(r));
  if (r.tp > 1 && !cuda) {
    // Gloo stages at most one reduced tensor: a step's hidden states or its gathered logits.
    const int64_t gloo = 4 * std::max(step.tokens * config.hidden_size,
                                      step.logit_rows * int64_t{config.vocab_size});
    plan->fixed.push_back({"gloo buffers", gloo,
                           "estimate: one step's largest collective (hidden states or logits)"});
  }
  if (cuda) {
    plan->fixed.push_back({"cuda runtime", kCudaRuntimeBytes,
                           "estimate (device memory within 1% of the plan on an H200)"});
    plan->fixed.push_back({"engine process", kCudaEngineProcessBytes,
                           "code, tokenizer, threads, HTTP, CUDA host mappings (an allowance; "
                           "547 MiB measured on an H200)"});
  } else {
    plan->fixed.push_back(
        {"engine process", kEngineProcessBytes,
         "code, tokenizer, threads, HTTP (an allowance; ~50 MiB measured on cpu)"});
  }
}

}  // namespace

Result<RankPlan> PlanRank(const core::ModelConfig& config, const ModelFamily& family,
                          const PlanRequest& r) {
  RankPlan plan;
  plan.tp = r.tp;
  plan.max_position_embeddings = config.max_position_embeddings;
  const MemoryQuery query{{0, r.tp}, r.moe, r.weight_dtype, r.kv_dtype, r.draft};
  SPARK_ASSIGN_OR_RETURN(MemoryFootprint footprint, Footprint(config, family, r, query, &plan));
  plan.kv_bytes_per_token = footprint.kv_bytes_per_token;
  plan.kv_bytes_per_sequence = footprint.kv_bytes_per_sequence;
  plan.mapped_bytes = footprint.mapped_bytes;
  plan.fixed.push_back({"weights", footprint.weight_bytes, plan.layout_note});

  const bool cuda = r.backend == "cuda";
  const bool bf16_inputs = cuda && r.weight_dtype != backend::DType::kF32;
  // The largest step: a full prefill chunk beside every other running sequence's decode token.
  const int64_t tokens = std::max<int64_t>(r.max_batched_tokens, r.max_num_seqs);
  const int moe_copies = cuda ? std::max(1, config.moe.top_k) : 1;
  // Drafts fit the token budget, but each verified one brings back a logits row, and so does
  // each prompt token being scored.
  const int64_t scored = r.chunked_prefill ? r.max_scored_tokens : tokens;
  const int64_t rows = int64_t{r.max_num_seqs} * (1 + std::max(0, r.speculative_tokens)) + scored;
  StepShape prefill{tokens, std::min<int64_t>(rows, tokens), r.max_model_len, bf16_inputs,
                    moe_copies};
  if (r.draft) {  // every running sequence may draft a block of its draft tokens
    prefill.draft_blocks = r.max_num_seqs;
    prefill.draft_block_tokens = std::max(1, r.speculative_tokens);
  }
  SPARK_ASSIGN_OR_RETURN(int64_t step, family.step_memory(config, query, prefill));
  plan.fixed.push_back({"activations", step,
                        "one step of " + std::to_string(tokens) + " tokens (the prefill chunk" +
                            (plan.serving_layout ? "; the reference backend's fp32 widths" : "") +
                            "; " + std::to_string(prefill.logit_rows) +
                            " logits rows (a sequence's own" +
                            (r.speculative_tokens > 0 ? ", its drafts'" : "") +
                            " and scored prompt tokens)" +
                            (r.draft ? "; the draft model's blocks for " +
                                           std::to_string(r.max_num_seqs) + " sequences"
                                     : "") +
                            ")"});
  if (cuda && r.cuda_graphs) {
    const StepShape decode{r.max_num_seqs, r.max_num_seqs, r.max_model_len, bf16_inputs,
                           moe_copies};
    SPARK_ASSIGN_OR_RETURN(int64_t graph, family.step_memory(config, query, decode));
    plan.fixed.push_back(
        {"cuda graph arena", CeilDiv(graph, kGraphArenaChunk) * kGraphArenaChunk,
         "decode steps of " + std::to_string(r.max_num_seqs) + " sequences, in 64 MiB chunks"});
  }
  AddProcessItems(config, r, prefill, &plan);
  for (const PlanItem& item : plan.fixed) plan.fixed_bytes += item.bytes;
  if (!r.kv_memory_fraction) {
    const int64_t blocks = r.kv_tokens
                               ? CeilDiv(*r.kv_tokens, r.block_size)
                               : DefaultKvBlocks(r.max_num_seqs, r.max_model_len, r.block_size);
    plan.kv_tokens = blocks * r.block_size;
    plan.kv_bytes = plan.kv_tokens * plan.kv_bytes_per_token +
                    int64_t{r.max_num_seqs} * plan.kv_bytes_per_sequence;
  }
  return plan;
}

NodeFit FitNode(const RankPlan& rank, const PlanRequest& r, const std::string& node,
                int64_t available, int ranks) {
  NodeFit f;
  f.node = node;
  f.available_bytes = available;
  f.ranks = std::max(1, ranks);
  const int64_t per_seq = int64_t{r.max_num_seqs} * rank.kv_bytes_per_sequence;
  // What each rank may give its KV cache with the floor kept.
  const int64_t room =
      std::max<int64_t>(0, (available - r.floors.startup) / f.ranks - rank.fixed_bytes);
  if (r.kv_memory_fraction) {
    // As the engine sizes it: the fraction of what the node has once the rest is in.
    const int64_t after = std::max<int64_t>(0, available / f.ranks - rank.fixed_bytes);
    const int64_t budget = static_cast<int64_t>(*r.kv_memory_fraction * static_cast<double>(after));
    const int64_t block = std::max<int64_t>(1, rank.kv_bytes_per_token * r.block_size);
    f.kv_tokens = std::max<int64_t>(0, (budget - per_seq) / block) * r.block_size;
  } else {
    f.kv_tokens = rank.kv_tokens;
  }
  f.kv_bytes = f.kv_tokens * rank.kv_bytes_per_token + per_seq;
  f.used_bytes = f.ranks * (rank.fixed_bytes + f.kv_bytes);
  f.headroom_bytes = available - f.used_bytes;
  f.ok = f.headroom_bytes >= r.floors.startup;
  const int64_t per_token = std::max<int64_t>(1, rank.kv_bytes_per_token);
  const int64_t seqs = std::max(1, r.max_num_seqs);
  const int64_t room_tokens = std::max<int64_t>(0, room - per_seq) / per_token;
  f.max_context = room_tokens / seqs;
  if (rank.max_position_embeddings > 0) {
    f.max_context = std::min(f.max_context, rank.max_position_embeddings);
  }
  f.max_concurrency = room / std::max<int64_t>(1, r.max_model_len * rank.kv_bytes_per_token +
                                                      rank.kv_bytes_per_sequence);
  if (f.ok) return f;
  const std::string short_by =
      "node " + node + ": " + Gib(f.headroom_bytes) + " GiB would stay available, below the " +
      Gib(r.floors.startup) + " GiB floor (" + Gib(available) + " GiB available, " +
      std::to_string(f.ranks) + " rank(s) of " + Gib(rank.fixed_bytes + f.kv_bytes) +
      " GiB: " + Gib(rank.fixed_bytes) + " GiB of weights, activations and buffers, " +
      Gib(f.kv_bytes) + " GiB of KV cache)";
  if (room <= per_seq) {
    f.knob = Knob::kTp;
    f.knob_value = r.tp * 2;
    f.message = short_by +
                "; the model alone does not leave room for a KV cache: spread it "
                "over more ranks (--tp " +
                std::to_string(r.tp * 2) + ") or hold smaller weights (--weight-dtype)";
  } else if (r.kv_memory_fraction) {
    const int64_t after = std::max<int64_t>(1, available / f.ranks - rank.fixed_bytes);
    f.knob = Knob::kKvFraction;
    f.knob_fraction =
        std::floor(static_cast<double>(room) / static_cast<double>(after) * 100) / 100;
    f.message =
        short_by + "; lower --kv-memory-fraction to " + FormatNumber(f.knob_fraction) + " or less";
  } else {
    f.knob = Knob::kKvTokens;
    f.knob_value = room_tokens / r.block_size * r.block_size;
    f.message = short_by + "; a KV cache of at most " + std::to_string(f.knob_value) +
                " tokens fits (--num-kv-blocks " + std::to_string(f.knob_value / r.block_size) +
                "), or lower --max-num-seqs / --max-model-len";
  }
  return f;
}

}  // namespace spark::engine::model
