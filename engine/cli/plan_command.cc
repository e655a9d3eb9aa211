// `spark-engine plan`: the memory plan of serving a checkpoint (engine/model/memory_plan.h),
// item by item per rank, fitted onto one or more nodes, with the context and concurrency that fit
// and the same at TP = 1, 2, 4 and 8. `sparkctl plan`, `profile check` and `up` read the JSON
// form (schema spark-engine-plan/v1); every rank makes the same plan before it loads.
// Exit status: 0 when every node fits, 2 when one does not (or on bad flags).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/strings.h"
#include "engine/cli/compute_choice.h"
#include "engine/cli/engine_command.h"
#include "engine/cli/speculative_flags.h"
#include "engine/cli/startup_memory.h"
#include "engine/model/memory_plan.h"
#include "engine/model/model_family.h"
#include "engine/runtime/host_memory.h"

namespace spark::engine {
namespace {

using cli::ComputeChoice;
using model::kGiB;
using nlohmann::ordered_json;

constexpr char kSchema[] = "spark-engine-plan/v1";

struct PlanOptions {
  std::string model_dir, config_file;
  std::string backend = "cuda";
  std::string weight_dtype = "auto", kv_dtype = "auto";
  bool cuda_graphs = false, no_cuda_graphs = false;
  int tp = 1;
  int max_model_len = 0;
  int max_num_seqs = 64;
  int max_batched_tokens = 2048;
  int num_speculative_tokens = 0;
  std::string speculative_method;  // "" when not given: drafts of no particular drafter
  bool no_chunked_prefill = false;
  int block_size = 16;
  int64_t num_kv_blocks = 0, kv_tokens = 0;
  double kv_memory_fraction = 0;
  double startup_floor_gib = 5, admit_floor_gib = 3, hard_floor_gib = 1;
  std::string nccl_buffsize, nccl_proto, nccl_max_nchannels;
  std::vector<std::string> nodes;  // NAME=GIB or NAME=local
  int ranks_per_node = 1;
  bool no_tp_sweep = false;
  bool json = false;
};

struct Node {
  std::string name;
  int64_t available = 0;
};

std::string Gib(int64_t bytes) {
  return FormatNumber(std::round(static_cast<double>(bytes) / kGiB * 100) / 100);
}

// "1.5 GiB", "312.0 MiB", "-3.2 GiB".
std::string Size(int64_t bytes) {
  const std::string text = HumanBytes(static_cast<uint64_t>(bytes < 0 ? -bytes : bytes));
  return bytes < 0 ? "-" + text : text;
}

Result<std::vector<Node>> ParseNodes(const std::vector<std::string>& specs) {
  std::vector<Node> nodes;
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgumentError("--node " + spec +
                                  ": want NAME=GIB (available memory) or "
                                  "NAME=local (this machine's)");
    }
    Node n{spec.substr(0, eq), 0};
    const std::string value = spec.substr(eq + 1);
    if (value == "local") {
      runtime::ProcHostMemory memory;
      SPARK_ASSIGN_OR_RETURN(runtime::HostMemorySample s, memory.Read());
      n.available = s.available_bytes;
    } else {
      char* end = nullptr;
      const double gib = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || gib < 0) {
        return InvalidArgumentError("--node " + spec + ": '" + value +
                                    "' is not a size in GiB (or 'local')");
      }
      n.available = static_cast<int64_t>(gib * kGiB);
    }
    nodes.push_back(n);
  }
  if (nodes.empty()) nodes.push_back({"spark", model::kSparkUsableBytes});
  return nodes;
}

// The element types "auto" means: the engine's own choice (compute_choice.h) when the directory
// holds the checkpoint's shards; from config.json alone otherwise (cpu: fp32; cuda: fp8 for an
// fp8 quantization_config, else bf16), within what the family keeps.
Result<ComputeChoice> Choose(const PlanOptions& o, const std::string& config_text,
                             const model::ModelFamily& family) {
  const bool shards = !o.model_dir.empty() && [&] {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(o.model_dir, ec)) {
      if (e.path().extension() == ".safetensors") return true;
    }
    return false;
  }();
  const std::optional<bool> graphs = o.cuda_graphs      ? std::optional(true)
                                     : o.no_cuda_graphs ? std::optional(false)
                                                        : std::nullopt;
  if (shards) {
    return cli::ChooseCompute({o.backend, o.model_dir, o.weight_dtype, o.kv_dtype, graphs});
  }
  ComputeChoice c;
  const auto keeps = [](std::span<const backend::DType> list, backend::DType t) {
    return std::find(list.begin(), list.end(), t) != list.end();
  };
  if (o.weight_dtype != "auto") {
    SPARK_ASSIGN_OR_RETURN(c.weights, backend::ParseDType(o.weight_dtype));
  } else if (o.backend == "cpu") {
    c.weights = backend::DType::kF32;
  } else {
    const auto doc = nlohmann::json::parse(config_text, nullptr, false);
    const bool fp8 = doc.is_object() && doc.contains("quantization_config") &&
                     doc["quantization_config"].value("quant_method", "") == "fp8";
    c.weights = fp8 ? backend::DType::kFP8 : backend::DType::kBF16;
  }
  if (!keeps(family.weight_dtypes, c.weights)) c.weights = family.weight_dtypes.front();
  if (o.kv_dtype != "auto") {
    SPARK_ASSIGN_OR_RETURN(c.kv, backend::ParseDType(o.kv_dtype));
  } else {
    c.kv = backend::KvDTypeFor(c.weights);
    if (!keeps(family.kv_dtypes, c.kv)) c.kv = family.kv_dtypes.front();
  }
  c.cuda_graphs = graphs.value_or(o.backend == "cuda") && o.backend == "cuda";
  return c;
}

model::PlanRequest MakeRequest(const PlanOptions& o, const ComputeChoice& c, int64_t max_len) {
  model::PlanRequest r;
  r.backend = o.backend;
  r.weight_dtype = c.weights;
  r.kv_dtype = c.kv;
  r.cuda_graphs = c.cuda_graphs;
  r.tp = o.tp;
  r.max_model_len = max_len;
  r.max_num_seqs = o.max_num_seqs;
  r.max_batched_tokens = o.no_chunked_prefill
                             ? std::max<int>(o.max_batched_tokens, static_cast<int>(max_len))
                             : o.max_batched_tokens;
  r.speculative_tokens = o.num_speculative_tokens;
  r.draft = o.speculative_method == "dspark";
  r.chunked_prefill = !o.no_chunked_prefill;
  r.block_size = o.block_size;
  if (o.kv_memory_fraction > 0) r.kv_memory_fraction = o.kv_memory_fraction;
  if (o.kv_tokens > 0) r.kv_tokens = o.kv_tokens;
  if (o.num_kv_blocks > 0) r.kv_tokens = o.num_kv_blocks * o.block_size;
  r.nccl_buffsize = o.nccl_buffsize;
  r.nccl_proto = o.nccl_proto;
  r.nccl_max_nchannels = o.nccl_max_nchannels;
  r.floors = {static_cast<int64_t>(o.startup_floor_gib * kGiB),
              static_cast<int64_t>(o.admit_floor_gib * kGiB),
              static_cast<int64_t>(o.hard_floor_gib * kGiB)};
  return r;
}

ordered_json FitJson(const model::NodeFit& f) {
  ordered_json j = {{"name", f.node},
                    {"available_bytes", f.available_bytes},
                    {"ranks", f.ranks},
                    {"kv_tokens", f.kv_tokens},
                    {"kv_bytes", f.kv_bytes},
                    {"used_bytes", f.used_bytes},
                    {"headroom_bytes", f.headroom_bytes},
                    {"ok", f.ok},
                    {"max_context", f.max_context},
                    {"max_concurrency", f.max_concurrency},
                    {"knob", std::string(model::KnobName(f.knob))}};
  if (f.knob == model::Knob::kKvFraction) {
    j["knob_value"] = f.knob_fraction;
  } else {
    j["knob_value"] = f.knob_value;
  }
  j["message"] = f.message;
  return j;
}

ordered_json RankJson(const model::RankPlan& p) {
  ordered_json items = ordered_json::array();
  for (const model::PlanItem& i : p.fixed) {
    items.push_back({{"name", i.name}, {"bytes", i.bytes}, {"note", i.note}});
  }
  return {{"layout", p.serving_layout ? "serving" : "held"},
          {"note", p.layout_note},
          {"items", items},
          {"fixed_bytes", p.fixed_bytes},
          {"kv",
           {{"bytes_per_token", p.kv_bytes_per_token},
            {"bytes_per_sequence", p.kv_bytes_per_sequence},
            {"tokens", p.kv_tokens},
            {"bytes", p.kv_bytes}}},
          {"mapped_bytes", p.mapped_bytes}};
}

void PrintTable(const ordered_json& doc) {
  const auto& s = doc["settings"];
  const int drafts = s["num_speculative_tokens"].get<int>();
  const bool dspark = s["speculative_method"].get<std::string>() == "dspark";
  std::printf("%s (%s) on %s, tp %d: %s tokens x %d running, %d per step%s%s\n",
              doc["model"]["source"].get<std::string>().c_str(),
              doc["model"]["family"].get<std::string>().c_str(),
              s["backend"].get<std::string>().c_str(), s["tp"].get<int>(),
              std::to_string(s["max_model_len"].get<int64_t>()).c_str(),
              s["max_num_seqs"].get<int>(), s["max_batched_tokens"].get<int>(),
              drafts > 0 ? (", " + std::to_string(drafts) + " drafts a sequence").c_str() : "",
              dspark ? " (the DSpark stack in weights, kv and activations)" : "");
  const auto& rank = doc["rank"];
  std::printf("%s\n\nper rank                    size   from\n",
              rank["note"].get<std::string>().c_str());
  for (const auto& i : rank["items"]) {
    std::printf("  %-22s %9s   %s\n", i["name"].get<std::string>().c_str(),
                Size(i["bytes"].get<int64_t>()).c_str(), i["note"].get<std::string>().c_str());
  }
  const auto& kv = rank["kv"];
  std::printf("  %-22s %9s   %s B a token, %s B a running sequence\n", "kv cache (budget)",
              Size(kv["bytes"].get<int64_t>()).c_str(),
              std::to_string(kv["bytes_per_token"].get<int64_t>()).c_str(),
              std::to_string(kv["bytes_per_sequence"].get<int64_t>()).c_str());
  if (rank["mapped_bytes"].get<int64_t>() > 0) {
    std::printf("  %-22s %9s   page cache (tables read by row), not counted\n", "mapped",
                Size(rank["mapped_bytes"].get<int64_t>()).c_str());
  }
  std::printf("\nfloor %s\n%-12s %9s %9s %9s %9s %12s %9s  %s\n",
              Size(doc["floors"]["startup_bytes"].get<int64_t>()).c_str(), "NODE", "AVAIL", "USED",
              "KV", "LEFT", "MAX CONTEXT", "MAX SEQS", "FITS");
  for (const auto& n : doc["nodes"]) {
    std::printf("%-12s %9s %9s %9s %9s %12s %9s  %s\n", n["name"].get<std::string>().c_str(),
                Size(n["available_bytes"].get<int64_t>()).c_str(),
                Size(n["used_bytes"].get<int64_t>()).c_str(),
                Size(n["kv_bytes"].get<int64_t>()).c_str(),
                Size(n["headroom_bytes"].get<int64_t>()).c_str(),
                std::to_string(n["max_context"].get<int64_t>()).c_str(),
                std::to_string(n["max_concurrency"].get<int64_t>()).c_str(),
                n["ok"].get<bool>() ? "yes" : "NO");
  }
  std::printf("(MAX CONTEXT at %d running requests, MAX SEQS at %s tokens each)\n",
              s["max_num_seqs"].get<int>(),
              std::to_string(s["max_model_len"].get<int64_t>()).c_str());
  for (const auto& n : doc["nodes"]) {
    if (!n["ok"].get<bool>()) std::printf("  %s\n", n["message"].get<std::string>().c_str());
  }
  if (doc.contains("tp_sweep")) {
    std::printf("\n%-4s %9s %9s %12s %9s  %s\n", "TP", "PER RANK", "LEFT", "MAX CONTEXT",
                "MAX SEQS", "FITS (on the smallest node)");
    for (const auto& t : doc["tp_sweep"]) {
      if (t.contains("problem")) {
        std::string problem = t["problem"].get<std::string>();
        for (char& c : problem) c = c == '\n' ? ';' : c;
        std::printf("%-4d %s\n", t["tp"].get<int>(), problem.c_str());
        continue;
      }
      std::printf("%-4d %9s %9s %12s %9s  %s\n", t["tp"].get<int>(),
                  Size(t["used_bytes"].get<int64_t>()).c_str(),
                  Size(t["headroom_bytes"].get<int64_t>()).c_str(),
                  std::to_string(t["max_context"].get<int64_t>()).c_str(),
                  std::to_string(t["max_concurrency"].get<int64_t>()).c_str(),
                  t["ok"].get<bool>() ? "yes" : "no");
    }
  }
}

Status CheckOptions(const PlanOptions& o) {
  if (o.model_dir.empty() == o.config_file.empty()) {
    return InvalidArgumentError("give --model DIR or --config FILE (config.json), one of them");
  }
  if (o.backend != "cpu" && o.backend != "cuda") {
    return InvalidArgumentError("--backend " + o.backend + ": want cpu or cuda");
  }
  if (o.tp < 1 || o.max_num_seqs < 1 || o.max_batched_tokens < 1 || o.block_size < 1 ||
      o.ranks_per_node < 1) {
    return InvalidArgumentError(
        "--tp, --max-num-seqs, --max-batched-tokens, --block-size and --ranks-per-node must be "
        ">= 1");
  }
  const int budgets = (o.num_kv_blocks > 0) + (o.kv_tokens > 0) + (o.kv_memory_fraction > 0);
  if (budgets > 1) {
    return InvalidArgumentError(
        "--num-kv-blocks, --kv-tokens and --kv-memory-fraction each size the KV cache: give one");
  }
  if (o.num_speculative_tokens < 0 || o.num_speculative_tokens > 16) {
    return InvalidArgumentError("--num-speculative-tokens " +
                                std::to_string(o.num_speculative_tokens) +
                                ": want 0 (no drafts) to 16, as serve's");
  }
  if (!o.speculative_method.empty()) {
    runtime::SpeculativeOptions spec;
    spec.method = o.speculative_method;
    spec.num_speculative_tokens = o.num_speculative_tokens;
    SPARK_RETURN_IF_ERROR(cli::ValidateSpeculativeFlags(spec));
  }
  if (o.kv_memory_fraction < 0 || o.kv_memory_fraction > 0.9) {
    return InvalidArgumentError("--kv-memory-fraction must be in (0, 0.9]");
  }
  return Status::Ok();
}

// config.json's text, from --config or --model's directory.
Result<std::pair<std::string, std::string>> ReadConfigText(const PlanOptions& o) {
  const std::string path = o.config_file.empty()
                               ? (std::filesystem::path(o.model_dir) / "config.json").string()
                               : o.config_file;
  std::ifstream in(path);
  if (!in) return NotFoundError(path + ": cannot read (--model DIR or --config FILE)");
  std::stringstream text;
  text << in.rdbuf();
  return std::pair{path, text.str()};
}

ordered_json SettingsJson(const PlanOptions& o, const ComputeChoice& c,
                          const model::PlanRequest& r) {
  ordered_json s = {{"backend", o.backend},
                    {"weight_dtype", backend::DTypeName(c.weights)},
                    {"kv_dtype", backend::DTypeName(c.kv)},
                    {"cuda_graphs", c.cuda_graphs},
                    {"tp", o.tp},
                    {"ranks_per_node", o.ranks_per_node},
                    {"max_model_len", r.max_model_len},
                    {"max_num_seqs", o.max_num_seqs},
                    {"max_batched_tokens", r.max_batched_tokens},
                    {"num_speculative_tokens", r.speculative_tokens},
                    {"speculative_method",
                     o.speculative_method.empty() ? "none" : o.speculative_method},
                    {"block_size", o.block_size}};
  s["kv_tokens"] = r.kv_tokens ? ordered_json(*r.kv_tokens) : nullptr;
  s["kv_memory_fraction"] = r.kv_memory_fraction ? ordered_json(*r.kv_memory_fraction) : nullptr;
  return s;
}

// The same settings at TP = 1, 2, 4, 8 on a node of `available` bytes.
ordered_json TpSweep(const core::ModelConfig& config, const model::ModelFamily& family,
                     const model::PlanRequest& request, int64_t available, int ranks_per_node) {
  ordered_json sweep = ordered_json::array();
  for (int tp : {1, 2, 4, 8}) {
    model::PlanRequest r = request;
    r.tp = tp;
    Result<model::RankPlan> p = model::PlanRank(config, family, r);
    if (!p.ok()) {
      sweep.push_back({{"tp", tp}, {"problem", p.status().message()}});
      continue;
    }
    const model::NodeFit f = model::FitNode(*p, r, "smallest", available, ranks_per_node);
    sweep.push_back({{"tp", tp},
                     {"used_bytes", p->fixed_bytes + f.kv_bytes},
                     {"headroom_bytes", f.headroom_bytes},
                     {"max_context", f.max_context},
                     {"max_concurrency", f.max_concurrency},
                     {"ok", f.ok}});
  }
  return sweep;
}

Result<ordered_json> MakePlan(const PlanOptions& o) {
  SPARK_RETURN_IF_ERROR(CheckOptions(o));
  SPARK_ASSIGN_OR_RETURN(auto text, ReadConfigText(o));
  SPARK_ASSIGN_OR_RETURN(core::ModelConfig config,
                         model::ParseModelConfig(text.second, text.first));
  if (o.speculative_method == "dspark") {
    const Status draft = cli::CheckDsparkLayers(config);
    if (!draft.ok()) return Status(draft.code(), text.first + ": " + draft.message());
  }
  const model::ModelFamily* family = model::FindModelFamily(config.model_type);
  SPARK_ASSIGN_OR_RETURN(ComputeChoice choice, Choose(o, text.second, *family));
  const int64_t max_len =
      o.max_model_len > 0 ? o.max_model_len : std::min(8192, config.max_position_embeddings);
  const model::PlanRequest request = MakeRequest(o, choice, max_len);
  SPARK_RETURN_IF_ERROR(request.floors.Validate());
  SPARK_ASSIGN_OR_RETURN(std::vector<Node> nodes, ParseNodes(o.nodes));
  SPARK_ASSIGN_OR_RETURN(model::RankPlan rank, model::PlanRank(config, *family, request));
  ordered_json doc = {{"schema", kSchema}};
  doc["model"] = {{"source", o.config_file.empty() ? o.model_dir : o.config_file},
                  {"model_type", config.model_type},
                  {"family", std::string(family->name)},
                  {"max_position_embeddings", config.max_position_embeddings}};
  doc["settings"] = SettingsJson(o, choice, request);
  doc["floors"] = {{"startup_bytes", request.floors.startup},
                   {"admit_bytes", request.floors.admit},
                   {"hard_bytes", request.floors.hard}};
  doc["rank"] = RankJson(rank);
  doc["nodes"] = ordered_json::array();
  bool ok = true;
  int64_t smallest = nodes.front().available;
  for (const Node& n : nodes) {
    const model::NodeFit f = model::FitNode(rank, request, n.name, n.available, o.ranks_per_node);
    ok = ok && f.ok;
    smallest = std::min(smallest, n.available);
    doc["nodes"].push_back(FitJson(f));
  }
  if (!o.no_tp_sweep)
    doc["tp_sweep"] = TpSweep(config, *family, request, smallest, o.ranks_per_node);
  doc["ok"] = ok;
  return doc;
}

}  // namespace

void RegisterPlanCommand(CLI::App& parent, CommandContext& context) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* cmd = parent.add_subcommand(
      "plan", "The memory a served model needs per rank, and the context x concurrency that fits");
  cmd->add_option("--model", o->model_dir,
                  "Checkpoint directory (config.json; the shards' "
                  "headers decide 'auto' element types)");
  cmd->add_option("--config", o->config_file, "A config.json alone (instead of --model)");
  cmd->add_option("--backend", o->backend, "cpu or cuda (default cuda: a Spark)");
  cmd->add_option("--weight-dtype", o->weight_dtype, "auto, fp32, bf16 or fp8 (as serve)");
  cmd->add_option("--kv-dtype", o->kv_dtype, "auto, fp32 or bf16 (as serve)");
  cmd->add_flag("--cuda-graphs", o->cuda_graphs, "Count the decode graphs' arena (cuda default)");
  cmd->add_flag("--no-cuda-graphs", o->no_cuda_graphs, "No decode graphs");
  cmd->add_option("--tp", o->tp, "Tensor-parallel ranks (default 1)");
  cmd->add_option("--max-model-len", o->max_model_len,
                  "Context per request (default: the model's, at most 8192, as serve)");
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Running requests (default 64)");
  cmd->add_option("--max-batched-tokens", o->max_batched_tokens,
                  "Tokens per step, the prefill chunk (default 2048)");
  cmd->add_option("--num-speculative-tokens", o->num_speculative_tokens,
                  "Draft tokens a sequence verifies a step (serve's; each brings back a logits "
                  "row; default 0)");
  cmd->add_option("--speculative-method", o->speculative_method,
                  "none, ngram or dspark (serve's): dspark counts the checkpoint's DSpark draft "
                  "stack, its weights, KV records and step buffers; refused for a checkpoint "
                  "without one");
  cmd->add_flag("--no-chunked-prefill", o->no_chunked_prefill,
                "A whole prompt in one step (the step is then at least --max-model-len)");
  cmd->add_option("--block-size", o->block_size, "KV block size in tokens (default 16)");
  cmd->add_option("--num-kv-blocks", o->num_kv_blocks, "KV budget in blocks (as serve)");
  cmd->add_option("--kv-tokens", o->kv_tokens, "KV budget in tokens per rank");
  cmd->add_option("--kv-memory-fraction", o->kv_memory_fraction,
                  "KV budget as this fraction of what a node has once the rest is in");
  cmd->add_option("--memory-floor-gib", o->startup_floor_gib,
                  "Memory a node must keep available (default 5, a Spark's)");
  cmd->add_option("--admit-floor-gib", o->admit_floor_gib, "Admission floor (default 3)");
  cmd->add_option("--hard-floor-gib", o->hard_floor_gib, "Shedding floor (default 1)");
  cmd->add_option("--nccl-buffsize", o->nccl_buffsize, "NCCL_BUFFSIZE the ranks will run with");
  cmd->add_option("--nccl-proto", o->nccl_proto, "NCCL_PROTO the ranks will run with");
  cmd->add_option("--nccl-max-nchannels", o->nccl_max_nchannels,
                  "NCCL_MAX_NCHANNELS the ranks will run with");
  cmd->add_option("--node", o->nodes,
                  "NAME=GIB: a node with this much memory available (repeatable); NAME=local: "
                  "this machine's MemAvailable (cgroup limits applied); default one Spark (" +
                      Gib(model::kSparkUsableBytes) + " GiB)");
  cmd->add_option("--ranks-per-node", o->ranks_per_node, "Ranks sharing one node (default 1)");
  cmd->add_flag("--no-tp-sweep", o->no_tp_sweep, "Leave out the TP = 1, 2, 4, 8 table");
  AddJsonFlag(cmd, &o->json, kSchema);
  cmd->footer(
      "\nExamples:\n  spark-engine plan --model tests/fixtures/models/qwen3-tiny --backend cpu "
      "--node here=local\n"
      "  spark-engine plan --config V4.1-Flash/config.json --tp 2 --max-model-len 262144 "
      "--max-num-seqs 4 --node spark-0=117 --node spark-1=117 --json\n"
      "Exit status: 0 when every node keeps its floor, 2 when one does not or on bad flags.");
  cmd->callback([o, &context] {
    Result<ordered_json> doc = MakePlan(*o);
    if (!doc.ok()) {
      if (o->json) {
        std::printf(
            "%s\n",
            ordered_json({{"schema", kSchema}, {"ok", false}, {"error", doc.status().message()}})
                .dump(2)
                .c_str());
      }
      context.exit_code = ReportEngineError(doc.status());
      return;
    }
    if (o->json) {
      std::printf("%s\n", doc->dump(2).c_str());
    } else {
      PrintTable(*doc);
    }
    context.exit_code = (*doc)["ok"].get<bool>() ? kExitOk : kExitFailed;
  });
}

}  // namespace spark::engine
