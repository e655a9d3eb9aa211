#include "sparkctl/profile/memory_plan.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "base/process.h"
#include "base/strings.h"

namespace spark::profile {
namespace {

using nlohmann::json;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string Size(int64_t bytes) {
  const std::string text = HumanBytes(static_cast<uint64_t>(bytes < 0 ? -bytes : bytes));
  return bytes < 0 ? "-" + text : text;
}

std::string Gib(double gib) { return FormatNumber(std::round(gib * 100) / 100); }

// obj[key] as T, or InvalidArgument naming where.
template <typename T>
Status Get(const json& obj, const char* key, const std::string& where, T* out) {
  if (!obj.is_object() || !obj.contains(key)) {
    return InvalidArgumentError(where + "." + key + ": missing");
  }
  try {
    *out = obj[key].get<T>();
  } catch (const json::exception&) {
    return InvalidArgumentError(where + "." + key + ": not the expected type");
  }
  return Status::Ok();
}

}  // namespace

Status ApplyWhatIf(const WhatIf& w, Profile* p) {
  if (w.context) p->engine.context_length = *w.context;
  if (w.concurrency) p->engine.max_running_requests = *w.concurrency;
  if (w.kv_dtype) {
    std::optional<KvCacheDtype> dtype = ParseKvCacheDtype(*w.kv_dtype);
    if (!dtype) {
      return InvalidArgumentError("--kv-dtype " + *w.kv_dtype +
                                  ": not a KV cache type (auto, fp8, bf16, fp16, fp32)");
    }
    p->engine.kv_cache.dtype = *dtype;
  }
  if (w.tp) {
    p->engine.tp = *w.tp;
    p->topology.nodes = std::max(1, *w.tp / std::max(1, p->topology.gpus_per_node));
    if (p->topology.nodes == 1) p->topology.kind = netplan::TopologyKind::kSingle;
    if (p->topology.nodes == 2 && p->topology.kind == netplan::TopologyKind::kSingle) {
      p->topology.kind = netplan::TopologyKind::kPair;
    }
  }
  if (w.kv_tokens) {
    p->engine.kv_cache.tokens = *w.kv_tokens;
    p->engine.kv_cache.memory_fraction.reset();
  }
  FieldErrors errors;
  Validate(*p, &errors);
  if (!errors.empty()) return errors.ToStatus("what-if");
  return Status::Ok();
}

std::vector<std::string> PlanArgs(const Profile& p, const std::string& checkpoint,
                                  const std::vector<NodeMemory>& nodes) {
  const EngineSpec& e = p.engine;
  std::vector<std::string> a = {checkpoint.ends_with(".json") ? "--config" : "--model",
                                checkpoint,
                                "--backend",
                                e.backend == "auto" ? "cuda" : e.backend,
                                "--tp",
                                std::to_string(e.tp),
                                "--max-model-len",
                                std::to_string(e.context_length),
                                "--max-num-seqs",
                                std::to_string(e.max_running_requests),
                                "--ranks-per-node",
                                std::to_string(p.topology.gpus_per_node)};
  if (e.weight_dtype != "auto") a.insert(a.end(), {"--weight-dtype", e.weight_dtype});
  if (e.kv_cache.dtype != KvCacheDtype::kAuto) {
    a.insert(a.end(), {"--kv-dtype", std::string(KvCacheDtypeName(e.kv_cache.dtype))});
  }
  if (e.cuda_graphs) a.push_back(*e.cuda_graphs ? "--cuda-graphs" : "--no-cuda-graphs");
  if (e.chunked_prefill == 0) {
    a.push_back("--no-chunked-prefill");
  } else {
    a.insert(a.end(), {"--max-batched-tokens", std::to_string(e.chunked_prefill)});
  }
  if (e.speculative.method != "none" && e.speculative.num_speculative_tokens > 0) {
    a.insert(a.end(), {"--speculative-method", e.speculative.method, "--num-speculative-tokens",
                       std::to_string(e.speculative.num_speculative_tokens)});
  }
  if (e.kv_cache.tokens) a.insert(a.end(), {"--kv-tokens", std::to_string(*e.kv_cache.tokens)});
  if (e.kv_cache.memory_fraction) {
    a.insert(a.end(), {"--kv-memory-fraction", FormatNumber(*e.kv_cache.memory_fraction)});
  }
  a.insert(a.end(), {"--memory-floor-gib", FormatNumber(e.memory_guard.startup_floor_gib),
                     "--admit-floor-gib", FormatNumber(e.memory_guard.admit_floor_gib),
                     "--hard-floor-gib", FormatNumber(e.memory_guard.hard_floor_gib)});
  for (auto [name, flag] :
       {std::pair{"NCCL_BUFFSIZE", "--nccl-buffsize"}, std::pair{"NCCL_PROTO", "--nccl-proto"},
        std::pair{"NCCL_MAX_NCHANNELS", "--nccl-max-nchannels"}}) {
    if (auto it = p.env.find(name); it != p.env.end()) a.insert(a.end(), {flag, it->second});
  }
  for (const NodeMemory& n : nodes) {
    a.insert(a.end(), {"--node", n.name + "=" + FormatNumber(n.available_bytes / kGiB)});
  }
  return a;
}

Result<EnginePlan> ParseEnginePlan(std::string_view text, const std::string& source) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  const std::string what = source + " plan --json";
  if (!doc.is_object()) return InvalidArgumentError(what + ": not a JSON object");
  if (doc.value("schema", "") != "spark-engine-plan/v1") {
    return InvalidArgumentError(what +
                                ": schema is not spark-engine-plan/v1 (sparkctl and "
                                "spark-engine come from different builds?)");
  }
  if (doc.contains("error")) return FailedPreconditionError(doc["error"].get<std::string>());
  EnginePlan p;
  p.raw = doc;
  SPARK_RETURN_IF_ERROR(Get(doc, "ok", what, &p.ok));
  SPARK_RETURN_IF_ERROR(Get(doc["model"], "family", what + ".model", &p.family));
  SPARK_RETURN_IF_ERROR(Get(doc["floors"], "startup_bytes", what + ".floors", &p.floor_bytes));
  const json& rank = doc.value("rank", json::object());
  SPARK_RETURN_IF_ERROR(Get(rank, "layout", what + ".rank", &p.layout));
  SPARK_RETURN_IF_ERROR(Get(rank, "note", what + ".rank", &p.note));
  SPARK_RETURN_IF_ERROR(Get(rank, "fixed_bytes", what + ".rank", &p.fixed_bytes));
  SPARK_RETURN_IF_ERROR(Get(rank, "mapped_bytes", what + ".rank", &p.mapped_bytes));
  const json& kv = rank.value("kv", json::object());
  SPARK_RETURN_IF_ERROR(Get(kv, "bytes_per_token", what + ".rank.kv", &p.kv_bytes_per_token));
  SPARK_RETURN_IF_ERROR(Get(kv, "bytes_per_sequence", what + ".rank.kv", &p.kv_bytes_per_sequence));
  for (const json& i : rank.value("items", json::array())) {
    PlanItem item;
    SPARK_RETURN_IF_ERROR(Get(i, "name", what + ".rank.items[]", &item.name));
    SPARK_RETURN_IF_ERROR(Get(i, "bytes", what + ".rank.items[]", &item.bytes));
    SPARK_RETURN_IF_ERROR(Get(i, "note", what + ".rank.items[]", &item.note));
    p.items.push_back(std::move(item));
  }
  for (const json& n : doc.value("nodes", json::array())) {
    PlanNode node;
    const std::string w = what + ".nodes[]";
    SPARK_RETURN_IF_ERROR(Get(n, "name", w, &node.name));
    SPARK_RETURN_IF_ERROR(Get(n, "available_bytes", w, &node.available_bytes));
    SPARK_RETURN_IF_ERROR(Get(n, "used_bytes", w, &node.used_bytes));
    SPARK_RETURN_IF_ERROR(Get(n, "kv_bytes", w, &node.kv_bytes));
    SPARK_RETURN_IF_ERROR(Get(n, "headroom_bytes", w, &node.headroom_bytes));
    SPARK_RETURN_IF_ERROR(Get(n, "ok", w, &node.ok));
    SPARK_RETURN_IF_ERROR(Get(n, "max_context", w, &node.max_context));
    SPARK_RETURN_IF_ERROR(Get(n, "max_concurrency", w, &node.max_concurrency));
    SPARK_RETURN_IF_ERROR(Get(n, "knob", w, &node.knob));
    SPARK_RETURN_IF_ERROR(Get(n, "knob_value", w, &node.knob_value));
    SPARK_RETURN_IF_ERROR(Get(n, "message", w, &node.message));
    p.nodes.push_back(std::move(node));
  }
  for (const json& t : doc.value("tp_sweep", json::array())) {
    PlanTp row;
    SPARK_RETURN_IF_ERROR(Get(t, "tp", what + ".tp_sweep[]", &row.tp));
    if (t.contains("problem")) {
      row.problem = t["problem"].get<std::string>();
    } else {
      const std::string w = what + ".tp_sweep[]";
      SPARK_RETURN_IF_ERROR(Get(t, "used_bytes", w, &row.used_bytes));
      SPARK_RETURN_IF_ERROR(Get(t, "headroom_bytes", w, &row.headroom_bytes));
      SPARK_RETURN_IF_ERROR(Get(t, "max_context", w, &row.max_context));
      SPARK_RETURN_IF_ERROR(Get(t, "max_concurrency", w, &row.max_concurrency));
      SPARK_RETURN_IF_ERROR(Get(t, "ok", w, &row.ok));
    }
    p.tp_sweep.push_back(std::move(row));
  }
  return p;
}

Result<EnginePlan> QueryPlan(const std::string& engine_binary,
                             const std::vector<std::string>& args) {
  if (!std::filesystem::exists(engine_binary)) {
    return NotFoundError("cannot ask spark-engine for the memory plan: " + engine_binary +
                         " does not exist (build it with ./scripts/build.sh, or pass --engine)");
  }
  std::vector<std::string> argv = {engine_binary, "plan", "--json"};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessRunner runner;
  SPARK_ASSIGN_OR_RETURN(CommandResult r, runner.Run(argv));
  Result<EnginePlan> plan = ParseEnginePlan(r.out, engine_binary);
  if (!plan.ok() && r.exit_code != 0) {
    const std::string err(Trim(r.err));
    return plan.status().code() == StatusCode::kFailedPrecondition
               ? plan.status()
               : InternalError(engine_binary + " plan --json exited with " +
                               std::to_string(r.exit_code) + (err.empty() ? "" : ": " + err));
  }
  return plan;
}

void ValidateAgainstPlan(const Profile& p, const EnginePlan& plan, FieldErrors* errors) {
  for (const PlanNode& n : plan.nodes) {
    if (n.ok) continue;
    const std::string head = "the memory plan leaves " + Size(n.headroom_bytes) + " on " + n.name +
                             " (" + Size(n.available_bytes) + " available, " + Size(n.used_bytes) +
                             " for the engine), below engine.memory_guard."
                             "startup_floor_gib (" +
                             FormatNumber(p.engine.memory_guard.startup_floor_gib) + ")";
    const std::string more = " (sparkctl plan -p " + p.source_file + " shows every item)";
    if (n.knob == "kv_tokens") {
      const std::string key =
          p.engine.kv_cache.tokens ? "engine.kv_cache.tokens" : "engine.context_length";
      errors->Add(key, head + "; a KV cache of at most " +
                           std::to_string(static_cast<int64_t>(n.knob_value)) +
                           " tokens per rank fits: lower engine.kv_cache.tokens, or "
                           "engine.context_length / engine.max_running_requests" +
                           more);
    } else if (n.knob == "kv_memory_fraction") {
      errors->Add("engine.kv_cache.memory_fraction",
                  head + "; lower it to " + FormatNumber(n.knob_value) + " or less" + more);
    } else {
      errors->Add("engine.tp", head + "; the weights, activations and buffers alone (" +
                                   Size(plan.fixed_bytes) +
                                   " a rank) leave no room: raise "
                                   "engine.tp (TP=" +
                                   std::to_string(static_cast<int>(n.knob_value)) +
                                   " would split them further), lower engine.chunked_prefill, "
                                   "or hold smaller weights (engine.weight_dtype)" +
                                   more);
    }
  }
}

std::string RenderPlan(const Profile& p, const EnginePlan& plan) {
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s: %s, tp %d, %lld tokens x %d running, chunk %d\n%s\n\n",
                p.name.c_str(), plan.family.c_str(), p.engine.tp,
                static_cast<long long>(p.engine.context_length), p.engine.max_running_requests,
                p.engine.chunked_prefill, plan.note.c_str());
  out += buf;
  out += "per rank                    size   from\n";
  for (const PlanItem& i : plan.items) {
    std::snprintf(buf, sizeof buf, "  %-22s %10s   %s\n", i.name.c_str(), Size(i.bytes).c_str(),
                  i.note.c_str());
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "  %-22s %10s   %lld B a token, %lld B a running sequence\n",
                "kv cache", "(per node)", static_cast<long long>(plan.kv_bytes_per_token),
                static_cast<long long>(plan.kv_bytes_per_sequence));
  out += buf;
  if (plan.mapped_bytes > 0) {
    std::snprintf(buf, sizeof buf, "  %-22s %10s   page cache, not counted\n", "mapped tables",
                  Size(plan.mapped_bytes).c_str());
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "\nfloor %s GiB\n%-12s %10s %10s %10s %10s %12s %9s  %s\n",
                Gib(plan.floor_bytes / kGiB).c_str(), "NODE", "AVAIL", "USED", "KV", "LEFT",
                "MAX CONTEXT", "MAX SEQS", "FITS");
  out += buf;
  for (const PlanNode& n : plan.nodes) {
    std::snprintf(buf, sizeof buf, "%-12s %10s %10s %10s %10s %12lld %9lld  %s\n", n.name.c_str(),
                  Size(n.available_bytes).c_str(), Size(n.used_bytes).c_str(),
                  Size(n.kv_bytes).c_str(), Size(n.headroom_bytes).c_str(),
                  static_cast<long long>(n.max_context), static_cast<long long>(n.max_concurrency),
                  n.ok ? "yes" : "NO");
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "(MAX CONTEXT at %d running requests; MAX SEQS at %lld tokens)\n",
                p.engine.max_running_requests, static_cast<long long>(p.engine.context_length));
  out += buf;
  if (!plan.tp_sweep.empty()) {
    std::snprintf(buf, sizeof buf, "\n%-4s %10s %10s %12s %9s  %s\n", "TP", "PER RANK", "LEFT",
                  "MAX CONTEXT", "MAX SEQS", "FITS (smallest node)");
    out += buf;
    for (const PlanTp& t : plan.tp_sweep) {
      if (!t.problem.empty()) {
        std::string problem = t.problem;
        for (char& c : problem) c = c == '\n' ? ';' : c;
        std::snprintf(buf, sizeof buf, "%-4d %s\n", t.tp, problem.c_str());
      } else {
        std::snprintf(buf, sizeof buf, "%-4d %10s %10s %12lld %9lld  %s\n", t.tp,
                      Size(t.used_bytes).c_str(), Size(t.headroom_bytes).c_str(),
                      static_cast<long long>(t.max_context),
                      static_cast<long long>(t.max_concurrency), t.ok ? "yes" : "no");
      }
      out += buf;
    }
  }
  FieldErrors errors;
  ValidateAgainstPlan(p, plan, &errors);
  if (!errors.empty()) out += "\n";
  for (const FieldError& e : errors.errors()) out += e.path + ": " + e.message + "\n";
  return out;
}

}  // namespace spark::profile
