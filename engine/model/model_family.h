// ModelFamily: everything the engine knows about one architecture, as one row; ModelFamilies()
// is the table of them (model_families.cc, in the style of ninja's kTools[]: an explicit list, no
// static registration). LoadModel, config.json parsing, spark-engine's defaults (chat format,
// reasoning and tool-call parsers), `spark-engine info --json` and, through it, `sparkctl
// profile check` all read this table, so a new family is one folder under engine/model/ that
// defines its row, plus one line in the table (docs/architecture.md, "Adding a model family").
// Thread-safety: the rows are constants.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/backend/backend.h"
#include "comm/communicator.h"
#include "engine/core/model_config.h"
#include "engine/model/model.h"
#include "engine/model/tp_shard.h"

namespace spark::engine::model {

// What one rank of a model holds, in the element types it holds them in, for a given plan.
struct MemoryQuery {
  TpShard shard;
  MoeSharding moe = MoeSharding::kInsideExperts;
  backend::DType weight_dtype = backend::DType::kF32;
  backend::DType kv_dtype = backend::DType::kF32;
  // The checkpoint's own draft model is loaded too (ModelOptions::load_draft).
  bool draft = false;
};

struct MemoryFootprint {
  int64_t weight_bytes = 0;          // the rank's weights in backend memory
  int64_t kv_bytes_per_token = 0;    // KV cache bytes each cached token takes (all layers)
  int64_t kv_bytes_per_sequence = 0; // state a running sequence holds whatever its length
  // Tables read by row from the mapped checkpoint instead of held (DeepSeek-V4.1's Engram): page
  // cache the kernel may evict, so not counted against a node's memory.
  int64_t mapped_bytes = 0;
};

// The size of one forward step, for the activations it allocates.
struct StepShape {
  int64_t tokens = 1;      // tokens the step runs (a prefill chunk plus decodes)
  int64_t logit_rows = 1;  // rows whose logits come back (sequences that sample)
  int64_t context = 1;     // the longest context a query of the step attends
  // The backend keeps bf16 copies of Linear inputs (Backend::Bf16InputsPay: cuda with bf16 or
  // fp8 weights).
  bool bf16_inputs = false;
  // Copies of each token the Moe op's scratch holds at once: 1 on the cpu backend (one expert at
  // a time), top_k on cuda (every routed copy, plus its routing weight).
  int moe_copies = 1;
  // Sequences a step drafts for with the checkpoint's draft model (MemoryQuery::draft), and the
  // tokens of each one's block (the drafter's num_speculative_tokens).
  int64_t draft_blocks = 0;
  int64_t draft_block_tokens = 0;
};

struct ModelFamily {
  std::string_view name;                         // "qwen3"
  std::span<const std::string_view> model_types;  // config.json model_type values it reads
  // config.json (a JSON object whose model_type is one of model_types) into a ModelConfig;
  // `path` names the file in errors. InvalidArgument listing every bad key.
  Result<core::ModelConfig> (*parse_config)(const nlohmann::json& doc, const std::string& path);
  // One rank's model from a checkpoint directory. LoadModel has already checked the backend,
  // the element types and the communicator against this row.
  Result<std::unique_ptr<Model>> (*load)(const std::string& dir, core::ModelConfig config,
                                         backend::Backend& backend, comm::Communicator* comm,
                                         const ModelOptions& options);
  // Bytes a rank holds (weights, KV per token, state per sequence) under `query`, from the
  // config alone; InvalidArgument when the shard does not fit the model (TpShard::CheckFits).
  Result<MemoryFootprint> (*memory)(const core::ModelConfig& config, const MemoryQuery& query);
  // Bytes of backend memory a rank's model works in at the peak of one step of `shape`: the
  // step's activations and logits, plus any workspace the model keeps between steps, from the
  // same widths the model allocates. InvalidArgument as `memory`.
  Result<int64_t> (*step_memory)(const core::ModelConfig& config, const MemoryQuery& query,
                                 const StepShape& shape);
  // The serving layout, for backends this build does not run the family on: the weights and
  // cache in the released checkpoint's storage types (DeepSeek's footprint.h). nullptr: `memory`
  // is the only layout (the held element types are the served ones).
  Result<MemoryFootprint> (*serving_memory)(const core::ModelConfig& config,
                                            const MemoryQuery& query) = nullptr;
  std::span<const std::string_view> backends;     // backend names it runs on ("cpu", "cuda")
  std::span<const backend::DType> weight_dtypes;  // ModelOptions::weight_dtype it accepts
  std::span<const backend::DType> kv_dtypes;      // ModelOptions::kv_dtype it accepts
  // Defaults of spark-engine serve: the chat format when the tokenizer's template is not one we
  // recognise, and the reasoning / tool-call parsers (tokenizer/chat_format.h names).
  std::string_view chat_format;
  std::string_view reasoning_parser;
  std::string_view tool_parser;
  // The speculative method of the checkpoint's own draft model (ModelOptions::load_draft), or
  // empty: DeepSeek-V4.1's "dspark".
  std::string_view draft_method;
};

// Every family this build knows, in a fixed order.
std::span<const ModelFamily* const> ModelFamilies();

// The family that reads `model_type`, or nullptr.
const ModelFamily* FindModelFamily(std::string_view model_type);

// "qwen3, qwen3_moe, deepseek_v4": every model_type of the table, for messages.
std::string KnownModelTypes();

// Parses config.json text: the family of its model_type parses the rest. `path` names the file
// in errors. InvalidArgument for bad JSON or bad keys; Unimplemented for a model_type no family
// reads (naming the known ones).
Result<core::ModelConfig> ParseModelConfig(std::string_view json_text, const std::string& path);

// Reads <dir>/config.json (and generation_config.json's extra EOS ids). NotFound when missing.
Result<core::ModelConfig> LoadModelConfig(const std::string& dir);

// What the row does not support, with the choices it does: Unimplemented for the backend,
// InvalidArgument for an element type. Ok otherwise.
Status CheckSupported(const ModelFamily& family, const std::string& backend_name,
                      const ModelOptions& options);

}  // namespace spark::engine::model
