// The memory plan of a profile, as the engine makes it: sparkctl turns the profile's engine fields
// (with what-if overrides) into `spark-engine plan` flags, runs the engine, reads its JSON
// (schema spark-engine-plan/v1) and reports each node that would keep less than the start-up
// floor as a problem at the profile key to turn. The accounting itself is the engine's
// (engine/model/memory_plan.h); sparkctl includes no engine code.
// Thread-safety: plain values and pure functions (QueryPlan starts a process).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/field_errors.h"
#include "base/status.h"
#include "sparkctl/profile/profile.h"

namespace spark::profile {

// `sparkctl plan --what-if` answers: the profile with some engine fields replaced.
struct WhatIf {
  std::optional<int64_t> context;       // engine.context_length
  std::optional<int> concurrency;       // engine.max_running_requests
  std::optional<std::string> kv_dtype;  // engine.kv_cache.dtype
  std::optional<int> tp;                // engine.tp (topology.nodes follows on one GPU a node)
  std::optional<int64_t> kv_tokens;     // engine.kv_cache.tokens (the fraction is dropped)
};

// Applies `what_if` to `profile` and validates the result; InvalidArgument naming the key.
Status ApplyWhatIf(const WhatIf& what_if, Profile* profile);

// A node's available memory, as the plan is fitted onto it.
struct NodeMemory {
  std::string name;
  int64_t available_bytes = 0;
};

// The arguments after `spark-engine plan`: `checkpoint` is a directory (--model) or, when it ends
// in .json, a config.json (--config); then the profile's settings, floors, NCCL_* entries of its
// env, and one --node per entry (none: the engine's default, one DGX Spark).
std::vector<std::string> PlanArgs(const Profile& profile, const std::string& checkpoint,
                                  const std::vector<NodeMemory>& nodes);

struct PlanItem {
  std::string name;
  int64_t bytes = 0;
  std::string note;
};

struct PlanNode {
  std::string name;
  int64_t available_bytes = 0, used_bytes = 0, kv_bytes = 0, headroom_bytes = 0;
  bool ok = false;
  int64_t max_context = 0, max_concurrency = 0;
  std::string knob;  // none, kv_tokens, kv_memory_fraction, tp
  double knob_value = 0;
  std::string message;  // the engine's, with its flag names
};

struct PlanTp {
  int tp = 1;
  std::string problem;  // the model does not split this way
  int64_t used_bytes = 0, headroom_bytes = 0, max_context = 0, max_concurrency = 0;
  bool ok = false;
};

struct EnginePlan {
  std::string family, layout, note;
  std::vector<PlanItem> items;
  int64_t fixed_bytes = 0, kv_bytes_per_token = 0, kv_bytes_per_sequence = 0, mapped_bytes = 0;
  int64_t floor_bytes = 0;
  std::vector<PlanNode> nodes;
  std::vector<PlanTp> tp_sweep;
  bool ok = false;
  nlohmann::json raw;  // the engine's document, for --json
};

// Parses `spark-engine plan --json`; InvalidArgument naming the missing key or an unknown schema,
// or the engine's own error when it reported one.
Result<EnginePlan> ParseEnginePlan(std::string_view json_text, const std::string& source);

// Runs `<engine_binary> plan --json <args>`. NotFound when the binary is missing; the engine's
// error (it exits 2 both for a plan that does not fit, which is returned, and for bad input).
Result<EnginePlan> QueryPlan(const std::string& engine_binary,
                             const std::vector<std::string>& args);

// One problem per node that does not fit, at the profile key to turn (engine.kv_cache.tokens,
// engine.kv_cache.memory_fraction, engine.tp), with the numbers and the value that would fit.
void ValidateAgainstPlan(const Profile& profile, const EnginePlan& plan, FieldErrors* errors);

// The plan for people: per-rank items, the nodes, the TP sweep, and the problems in profile keys.
std::string RenderPlan(const Profile& profile, const EnginePlan& plan);

}  // namespace spark::profile
