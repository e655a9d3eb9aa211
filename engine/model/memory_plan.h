// MemoryPlan: what one rank of a served model holds in memory, item by item, and what that leaves
// on its node. The items come from the family row's own accounting (model_family.h: the weights
// and KV cache in the element types held, the step's activations from the widths the model
// allocates), plus what the serving process adds around the model: the transport's buffers, the
// CUDA graph arena, the CUDA runtime and the engine process itself. `spark-engine plan` prints it,
// `sparkctl plan` and `up` read it, and every rank checks its own plan against the node's memory
// before it loads (the start-up guard), so the plan and the engine cannot disagree.
//
// A node fits when, after its ranks' totals, at least the start-up floor stays available
// (default 5 GiB: exhausting a GB10's unified memory freezes the host; field reports refuse to
// start below ~5 GiB). docs/memory.md lists every item and where its figure comes from.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/core/model_config.h"
#include "engine/model/model_family.h"

namespace spark::engine::model {

inline constexpr int64_t kGiB = int64_t{1} << 30;
inline constexpr int64_t kMiB = int64_t{1} << 20;

// Floors of available memory on a node (MemAvailable, cgroup limits applied).
struct MemoryFloors {
  int64_t startup = 5 * kGiB;  // refuse to start when a node would have less after loading
  int64_t admit = 3 * kGiB;    // stop admitting new sequences below this
  int64_t hard = 1 * kGiB;     // shed the newest running request (503) below this
  // InvalidArgument unless 0 <= hard <= admit <= startup.
  Status Validate() const;
};

// The serve settings a plan is made for (spark-engine serve's flags; profile keys in sparkctl).
struct PlanRequest {
  std::string backend = "cuda";
  backend::DType weight_dtype = backend::DType::kBF16;
  backend::DType kv_dtype = backend::DType::kBF16;
  bool cuda_graphs = true;
  int tp = 1;
  MoeSharding moe = MoeSharding::kInsideExperts;
  int64_t max_model_len = 8192;   // context per request
  int max_num_seqs = 64;          // running requests
  int max_batched_tokens = 2048;  // tokens per step: the prefill chunk
  // Draft tokens a sequence may verify a step (speculative decoding): each brings back a logits
  // row of its own. 0: no drafts.
  int speculative_tokens = 0;
  // The checkpoint's draft model is held too (speculative method dspark).
  bool draft = false;
  // Prompt scoring (prompt_logprobs) brings back a row per prompt token: with chunked prefill at
  // most max_scored_tokens a step (runtime::SchedulerOptions), without it a whole prompt.
  bool chunked_prefill = true;
  int max_scored_tokens = 512;
  int block_size = 16;
  // The KV budget: tokens per rank, or a fraction of the memory left after the rest; neither:
  // serve's default (DefaultKvBlocks).
  std::optional<int64_t> kv_tokens;
  std::optional<double> kv_memory_fraction;
  // NCCL settings that decide its pinned buffers (the profile's env): NCCL_BUFFSIZE,
  // NCCL_PROTO, NCCL_MAX_NCHANNELS. Empty: NCCL's defaults.
  std::string nccl_buffsize, nccl_proto, nccl_max_nchannels;
  MemoryFloors floors;
};

// serve's KV cache when neither a block count nor a fraction is given: max_num_seqs full-length
// sequences, at most 4096 blocks.
int64_t DefaultKvBlocks(int max_num_seqs, int64_t max_model_len, int block_size);

struct PlanItem {
  std::string name;  // "weights", "activations", "nccl buffers", ...
  int64_t bytes = 0;
  std::string note;  // where the figure comes from
};

// One rank (rank 0, which holds the most: the vocabulary splits with rank 0's share the largest).
struct RankPlan {
  int tp = 1;
  bool serving_layout = false;  // the family's serving_memory: this build does not run it there
  std::string layout_note;
  std::vector<PlanItem> fixed;  // everything but the KV cache
  int64_t fixed_bytes = 0;
  int64_t kv_bytes_per_token = 0;
  int64_t kv_bytes_per_sequence = 0;  // times max_num_seqs, counted in kv_bytes
  int64_t mapped_bytes = 0;           // page cache, not counted
  // KV cache of a fixed budget (kv_tokens or the default); 0 with kv_memory_fraction until a
  // node's memory is known (FitNode).
  int64_t kv_tokens = 0;
  int64_t kv_bytes = 0;
  int64_t max_position_embeddings = 0;
};

// What turning one setting would make fit.
enum class Knob { kNone, kKvTokens, kKvFraction, kTp };
std::string_view KnobName(Knob knob);  // "none", "kv_tokens", "kv_memory_fraction", "tp"

struct NodeFit {
  std::string node;
  int64_t available_bytes = 0;
  int ranks = 1;
  int64_t kv_tokens = 0;  // the rank's KV budget on this node
  int64_t kv_bytes = 0;
  int64_t used_bytes = 0;      // every rank of the node, KV included
  int64_t headroom_bytes = 0;  // available - used
  bool ok = false;
  // With this node's memory (floor kept): the longest context at max_num_seqs running requests,
  // and the running requests at max_model_len (full-length each); 0 when none fits.
  int64_t max_context = 0;
  int64_t max_concurrency = 0;
  Knob knob = Knob::kNone;   // the first setting to turn when !ok
  int64_t knob_value = 0;    // kKvTokens: the most tokens that fit; kTp: the tp to try
  double knob_fraction = 0;  // for kKvFraction
  std::string message;       // for people, with spark-engine's flag names
};

// The rank's plan. InvalidArgument when tp does not divide the model (TpShard::CheckFits);
// Unimplemented when the family runs neither on `backend` nor has a serving layout.
Result<RankPlan> PlanRank(const core::ModelConfig& config, const ModelFamily& family,
                          const PlanRequest& request);

// The rank plan on a node with `available_bytes` (MemAvailable before the engine starts) and
// `ranks` ranks of this plan.
NodeFit FitNode(const RankPlan& rank, const PlanRequest& request, const std::string& node,
                int64_t available_bytes, int ranks = 1);

// A DGX Spark's usable unified memory (GB10: ~121.7 GiB of 128 GB), the node of a plan when none
// is given.
inline constexpr int64_t kSparkUsableBytes = int64_t{127601864} * 1024;

}  // namespace spark::engine::model
