#include "sparkctl/profile/profile_yaml.h"

#include <algorithm>
#include <filesystem>

#include "base/strings.h"
#include "base/yaml_reader.h"
#include "sparkctl/profile/memory_plan.h"

namespace spark::profile {
namespace {

void ReadModel(YamlReader* r, const YAML::Node& node, ModelSpec* m) {
  YamlMap map(r, node, "model");
  map.Required("repository", &m->repository);
  map.Required("revision", &m->revision);
  map.Required("path", &m->path);
  map.Optional("manifest", &m->manifest);
  map.Optional("served_name", &m->served_name);
  map.Optional("size_gib", &m->size_gib);
  map.Optional("resident_gib_per_node", &m->resident_gib_per_node);
  map.RejectUnknown();
}

void ReadTopology(YamlReader* r, const YAML::Node& node, TopologySpec* t) {
  YamlMap map(r, node, "topology");
  std::string kind;
  if (map.Required("kind", &kind)) {
    auto parsed = netplan::ParseTopology(kind);
    if (parsed) {
      t->kind = *parsed;
    } else {
      r->AddError("topology.kind", "'" + kind + "' is not a topology (single, pair, ring, line, switched)" +
                                       DidYouMean(kind, {"single", "pair", "ring", "line", "switched"}));
    }
  }
  map.Required("nodes", &t->nodes);
  map.Optional("gpus_per_node", &t->gpus_per_node);
  map.RejectUnknown();
}

void ReadKernel(YamlReader* r, const YAML::Node& node, HostSpec* h) {
  YamlMap map(r, node, "host.kernel");
  map.Optional("allow", &h->kernel_allow);
  map.Optional("cmdline", &h->kernel_cmdline);
  YAML::Node deny = map.ChildSeq("deny", false);
  for (size_t i = 0; deny.IsDefined() && i < deny.size(); ++i) {
    KernelDeny d;
    YamlMap entry(r, deny[i], "host.kernel.deny[" + std::to_string(i) + "]");
    entry.Required("release", &d.release);
    entry.Required("reason", &d.reason);
    entry.Required("fix", &d.fix);
    entry.RejectUnknown();
    h->kernel_deny.push_back(std::move(d));
  }
  map.RejectUnknown();
}

void ReadHost(YamlReader* r, const YAML::Node& node, HostSpec* h) {
  YamlMap map(r, node, "host");
  YAML::Node kernel = map.ChildMap("kernel", false);
  if (kernel.IsDefined()) ReadKernel(r, kernel, h);
  map.Optional("min_cma_mib", &h->min_cma_mib);
  map.Optional("memlock", &h->memlock);
  map.Optional("min_free_memory_gib", &h->min_free_memory_gib);
  map.RejectUnknown();
}

void ReadKvCache(YamlReader* r, const YAML::Node& node, KvCacheSpec* kv) {
  YamlMap map(r, node, "engine.kv_cache");
  std::string dtype;
  if (map.Optional("dtype", &dtype)) {
    auto parsed = ParseKvCacheDtype(dtype);
    if (parsed) {
      kv->dtype = *parsed;
    } else {
      r->AddError("engine.kv_cache.dtype", "'" + dtype + "' is not a KV cache dtype (auto, fp8, bf16, fp16, fp32)" +
                                               DidYouMean(dtype, {"auto", "fp8", "bf16", "fp16", "fp32"}));
    }
  }
  int64_t tokens = 0;
  if (map.Optional("tokens", &tokens)) kv->tokens = tokens;
  double fraction = 0;
  if (map.Optional("memory_fraction", &fraction)) kv->memory_fraction = fraction;
  map.RejectUnknown();
}

void ReadEngine(YamlReader* r, const YAML::Node& node, EngineSpec* e) {
  YamlMap map(r, node, "engine");
  map.Optional("backend", &e->backend);
  map.Optional("weight_dtype", &e->weight_dtype);
  if (bool graphs = false; map.Optional("cuda_graphs", &graphs)) e->cuda_graphs = graphs;
  map.Required("tp", &e->tp);
  map.Optional("context_length", &e->context_length);
  map.Optional("max_running_requests", &e->max_running_requests);
  YAML::Node kv = map.ChildMap("kv_cache", true);
  if (kv.IsDefined()) ReadKvCache(r, kv, &e->kv_cache);
  map.Optional("chunked_prefill", &e->chunked_prefill);
  map.Optional("prefix_caching", &e->prefix_caching);
  YAML::Node spec = map.ChildMap("speculative", false);
  if (spec.IsDefined()) {
    YamlMap s(r, spec, "engine.speculative");
    s.Optional("method", &e->speculative.method);
    s.Optional("num_speculative_tokens", &e->speculative.num_speculative_tokens);
    if (int n = 0; s.Optional("prompt_lookup_max", &n)) e->speculative.prompt_lookup_max = n;
    if (int n = 0; s.Optional("prompt_lookup_min", &n)) e->speculative.prompt_lookup_min = n;
    s.RejectUnknown();
  }
  map.Optional("reasoning_parser", &e->reasoning_parser);
  map.Optional("tool_parser", &e->tool_parser);
  YAML::Node guard = map.ChildMap("memory_guard", false);
  if (guard.IsDefined()) {
    YamlMap g(r, guard, "engine.memory_guard");
    g.Optional("startup_floor_gib", &e->memory_guard.startup_floor_gib);
    g.Optional("admit_floor_gib", &e->memory_guard.admit_floor_gib);
    g.Optional("hard_floor_gib", &e->memory_guard.hard_floor_gib);
    g.RejectUnknown();
  }
  YAML::Node coll = map.ChildMap("collectives", false);
  if (coll.IsDefined()) {
    YamlMap c(r, coll, "engine.collectives");
    c.Optional("oneshot_max_bytes", &e->collectives.oneshot_max_bytes);
    c.Optional("wire", &e->collectives.wire);
    c.RejectUnknown();
  }
  map.RejectUnknown();
}

void ReadApi(YamlReader* r, const YAML::Node& node, ApiSpec* a) {
  YamlMap map(r, node, "api");
  map.Optional("port", &a->port);
  map.Optional("bind", &a->bind);
  map.Optional("key_file", &a->key_file);
  map.Optional("default_max_tokens", &a->default_max_tokens);
  map.Optional("max_tokens_limit", &a->max_tokens_limit);
  YAML::Node tls = map.ChildMap("tls", false);
  if (tls.IsDefined()) {
    YamlMap t(r, tls, "api.tls");
    t.Optional("cert", &a->tls.cert);
    t.Optional("key", &a->tls.key);
    t.Optional("ca", &a->tls.ca);
    t.RejectUnknown();
  }
  YAML::Node limits = map.ChildMap("limits", false);
  if (limits.IsDefined()) {
    YamlMap l(r, limits, "api.limits");
    l.Optional("max_connections", &a->limits.max_connections);
    l.Optional("max_connections_per_peer", &a->limits.max_connections_per_peer);
    l.Optional("max_requests_per_peer", &a->limits.max_requests_per_peer);
    l.RejectUnknown();
  }
  map.RejectUnknown();
}

// Whether `a` is `b` or one holds the other ("engine.kv_cache" and "engine.kv_cache.tokens").
bool SameOrNested(const std::string& a, const std::string& b) {
  const auto nested = [](const std::string& outer, const std::string& inner) {
    return inner.size() > outer.size() && inner.starts_with(outer) &&
           (inner[outer.size()] == '.' || inner[outer.size()] == '[');
  };
  return a == b || nested(a, b) || nested(b, a);
}

// Reads the document and runs every check on it; the reader holds the problems.
std::optional<Profile> ReadAll(YamlReader& reader, const EngineCapabilities* caps,
                               bool check_files, std::vector<std::string>* notes);

Result<Profile> Read(YamlReader reader, const EngineCapabilities* caps) {
  std::optional<Profile> p = ReadAll(reader, caps, /*check_files=*/false, nullptr);
  SPARK_RETURN_IF_ERROR(reader.ToStatus());
  return *p;
}

// The checkpoint checks where this machine has a copy of it; a note where it cannot run them.
void CheckModel(const Profile& p, const EngineCapabilities& caps, FieldErrors* errors,
                std::vector<std::string>* notes) {
  const std::string config = p.model.path + "/config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(config, ec)) {
    notes->push_back("model type, backend and tp not checked: " + config +
                     " is not on this machine (the engine checks them when it loads)");
    return;
  }
  Result<ModelCheck> model = QueryModel(caps.source, p.model.path, p.engine.tp);
  if (!model.ok()) {
    notes->push_back("model type, backend and tp not checked: " + model.status().message());
    return;
  }
  ValidateAgainstModel(p, *model, errors);
  if (!model->problems.empty()) return;
  // The memory plan on a DGX Spark (each node's real memory: `sparkctl plan -c`, and `up`).
  Result<EnginePlan> plan = QueryPlan(caps.source, PlanArgs(p, p.model.path, {}));
  if (!plan.ok()) {
    notes->push_back("memory plan not checked: " + plan.status().message());
    return;
  }
  ValidateAgainstPlan(p, *plan, errors);
}

std::optional<Profile> ReadAll(YamlReader& reader, const EngineCapabilities* caps,
                               bool check_files, std::vector<std::string>* notes) {
  Profile p;
  p.source_file = reader.file();
  YamlMap root(&reader, reader.root(), "");
  root.Required("schema", &p.schema);
  root.Required("name", &p.name);
  root.Optional("description", &p.description);
  YAML::Node model = root.ChildMap("model", true);
  if (model.IsDefined()) ReadModel(&reader, model, &p.model);
  YAML::Node topology = root.ChildMap("topology", true);
  if (topology.IsDefined()) ReadTopology(&reader, topology, &p.topology);
  YAML::Node host = root.ChildMap("host", false);
  if (host.IsDefined()) ReadHost(&reader, host, &p.host);
  YAML::Node engine = root.ChildMap("engine", true);
  if (engine.IsDefined()) ReadEngine(&reader, engine, &p.engine);
  YAML::Node api = root.ChildMap("api", false);
  if (api.IsDefined()) ReadApi(&reader, api, &p.api);
  YAML::Node quality = root.ChildMap("quality", false);
  if (quality.IsDefined()) {
    YamlMap q(&reader, quality, "quality");
    p.quality.emplace();
    q.Required("text", &p.quality->text);
    q.Required("perplexity", &p.quality->perplexity);
    q.Optional("tolerance", &p.quality->tolerance);
    q.Optional("context", &p.quality->context);
    q.RejectUnknown();
  }
  root.Optional("env", &p.env);
  root.RejectUnknown();
  // The rules run on whatever was read, so one run reports every problem; a key whose shape was
  // already wrong (or one inside or around it) is not reported again.
  std::vector<std::string> shape_keys;
  for (const YamlProblem& problem : reader.problems()) shape_keys.push_back(problem.key);
  ApplyDefaults(&p);
  FieldErrors errors;
  Validate(p, &errors);
  if (caps != nullptr) ValidateAgainstEngine(p, *caps, &errors);
  if (check_files && !p.model.manifest.empty()) {
    const std::string manifest = ResolvedManifestPath(p);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(manifest, ec)) {
      errors.Add("model.manifest",
                 manifest + " does not exist: create it from a copy of the checkpoint "
                            "(sparkctl weights manifest DIR --repo " + p.model.repository +
                            " --revision " + p.model.revision + " --out " + manifest + ")");
    }
  }
  if (check_files && p.quality && !p.quality->text.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(ResolvedQualityText(p), ec)) {
      errors.Add("quality.text", ResolvedQualityText(p) +
                                     " does not exist: the text the reference perplexity scores");
    }
  }
  if (check_files && caps != nullptr && notes != nullptr && !p.model.path.empty()) {
    CheckModel(p, *caps, &errors, notes);
  }
  for (const FieldError& e : errors.errors()) {
    const bool repeated = std::any_of(shape_keys.begin(), shape_keys.end(), [&](const auto& k) {
      return !k.empty() && SameOrNested(k, e.path);
    });
    if (!repeated) reader.AddError(e.path, e.message);
  }
  if (!reader.ok()) return std::nullopt;
  return p;
}

ProfileCheck Check(Result<YamlReader> reader, const YamlProblem& syntax,
                   const std::string& file, const EngineCapabilities* caps, bool check_files) {
  ProfileCheck out;
  if (!reader.ok()) {
    // A syntax error has its place; an unreadable file only its message.
    out.problems.push_back(!syntax.message.empty()
                               ? syntax
                               : YamlProblem{file, {}, "", reader.status().message()});
    return out;
  }
  out.profile = ReadAll(*reader, caps, check_files, &out.notes);
  out.problems = reader->problems();
  std::stable_sort(out.problems.begin(), out.problems.end(), [](const auto& a, const auto& b) {
    return std::pair(a.location.line, a.location.column) <
           std::pair(b.location.line, b.location.column);
  });
  return out;
}

}  // namespace

Result<Profile> LoadProfileFile(const std::string& path, const EngineCapabilities* engine) {
  SPARK_ASSIGN_OR_RETURN(YamlReader reader, YamlReader::FromFile(path));
  return Read(std::move(reader), engine);
}

Result<Profile> ParseProfile(const std::string& text, const std::string& file,
                             const EngineCapabilities* engine) {
  SPARK_ASSIGN_OR_RETURN(YamlReader reader, YamlReader::FromString(text, file));
  return Read(std::move(reader), engine);
}

Status ProfileCheck::ToStatus() const {
  if (problems.empty()) return Status::Ok();
  if (problems.size() == 1 && problems[0].location.line == 0) {
    return NotFoundError(problems[0].message);
  }
  std::vector<std::string> lines;
  for (const YamlProblem& p : problems) lines.push_back(p.ToString());
  return InvalidArgumentError(Join(lines, "\n"));
}

ProfileCheck CheckProfileFile(const std::string& path, const EngineCapabilities* engine,
                              bool check_files) {
  YamlProblem syntax;
  Result<YamlReader> reader = YamlReader::FromFile(path, &syntax);
  return Check(std::move(reader), syntax, path, engine, check_files);
}

ProfileCheck CheckProfileText(const std::string& text, const std::string& file,
                              const EngineCapabilities* engine, bool check_files) {
  YamlProblem syntax;
  Result<YamlReader> reader = YamlReader::FromString(text, file, &syntax);
  return Check(std::move(reader), syntax, file, engine, check_files);
}

std::string ResolvedManifestPath(const Profile& profile) {
  if (profile.model.manifest.empty()) return "";
  std::filesystem::path manifest(profile.model.manifest);
  if (manifest.is_absolute() || profile.source_file.empty()) return manifest.string();
  return (std::filesystem::path(profile.source_file).parent_path() / manifest).lexically_normal();
}

}  // namespace spark::profile
