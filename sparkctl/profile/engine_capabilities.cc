#include "sparkctl/profile/engine_capabilities.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/process.h"
#include "base/strings.h"

namespace spark::profile {
namespace {

using nlohmann::json;

bool Contains(const std::vector<std::string>& list, const std::string& v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

std::string Join(const std::vector<std::string>& list) {
  std::string out;
  for (const std::string& s : list) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// obj[key] as a list of strings, or an error naming `where`.
Status Strings(const json& obj, const char* key, const std::string& where,
               std::vector<std::string>* out) {
  if (!obj.contains(key) || !obj[key].is_array()) {
    return InvalidArgumentError(where + "." + key + ": missing or not a list");
  }
  for (const json& v : obj[key]) {
    if (!v.is_string()) return InvalidArgumentError(where + "." + key + ": holds a non-string");
    out->push_back(v.get<std::string>());
  }
  return Status::Ok();
}

Status String(const json& obj, const char* key, const std::string& where, std::string* out) {
  if (!obj.contains(key) || !obj[key].is_string()) {
    return InvalidArgumentError(where + "." + key + ": missing or not a string");
  }
  *out = obj[key].get<std::string>();
  return Status::Ok();
}

}  // namespace

std::vector<std::string> EngineCapabilities::Parsers() const {
  std::vector<std::string> out;
  for (const EngineFamily& f : families) {
    for (const std::string& p : {f.reasoning_parser, f.tool_parser}) {
      if (!p.empty() && !Contains(out, p)) out.push_back(p);
    }
  }
  return out;
}

std::vector<std::string> EngineCapabilities::KvDtypes() const {
  std::vector<std::string> out;
  for (const EngineFamily& f : families) {
    for (const std::string& d : f.kv_dtypes) {
      if (!Contains(out, d)) out.push_back(d);
    }
  }
  return out;
}

bool EngineCapabilities::ReadsEnv(const std::string& name) const {
  if (Contains(env_variables, name)) return true;
  return std::any_of(env_prefixes.begin(), env_prefixes.end(),
                     [&](const std::string& p) { return name.starts_with(p); });
}

Result<EngineCapabilities> ParseEngineInfo(std::string_view json_text, const std::string& source) {
  const json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  const std::string what = source + " info --json";
  if (!doc.is_object()) return InvalidArgumentError(what + ": not a JSON object");
  if (!doc.contains("schema") || doc["schema"] != "spark-engine-info/v1") {
    return InvalidArgumentError(what + ": schema is not spark-engine-info/v1 (sparkctl and "
                                       "spark-engine come from different builds?)");
  }
  EngineCapabilities caps;
  caps.source = source;
  Status s = String(doc, "version", what, &caps.version);
  if (s.ok()) s = Strings(doc, "backends", what, &caps.backends);
  if (s.ok()) s = Strings(doc, "chat_formats", what, &caps.chat_formats);
  if (!s.ok()) return s;
  // Keys newer than the schema's first version: absent means "none".
  if (s.ok() && doc.contains("speculative_methods")) {
    s = Strings(doc, "speculative_methods", what, &caps.speculative_methods);
  }
  if (s.ok() && doc.contains("environment")) {
    s = Strings(doc["environment"], "variables", what + ".environment", &caps.env_variables);
    if (s.ok()) s = Strings(doc["environment"], "prefixes", what + ".environment", &caps.env_prefixes);
  }
  if (!s.ok()) return s;
  if (!doc.contains("model_families") || !doc["model_families"].is_array()) {
    return InvalidArgumentError(what + ".model_families: missing or not a list");
  }
  for (const json& f : doc["model_families"]) {
    EngineFamily family;
    const std::string where = what + ".model_families[" + std::to_string(caps.families.size()) + "]";
    SPARK_RETURN_IF_ERROR(String(f, "name", where, &family.name));
    SPARK_RETURN_IF_ERROR(Strings(f, "model_types", where, &family.model_types));
    SPARK_RETURN_IF_ERROR(Strings(f, "backends", where, &family.backends));
    SPARK_RETURN_IF_ERROR(Strings(f, "weight_dtypes", where, &family.weight_dtypes));
    SPARK_RETURN_IF_ERROR(Strings(f, "kv_dtypes", where, &family.kv_dtypes));
    SPARK_RETURN_IF_ERROR(String(f, "chat_format", where, &family.chat_format));
    SPARK_RETURN_IF_ERROR(String(f, "reasoning_parser", where, &family.reasoning_parser));
    SPARK_RETURN_IF_ERROR(String(f, "tool_parser", where, &family.tool_parser));
    caps.families.push_back(std::move(family));
  }
  return caps;
}

// `<engine_binary> info --json [extra...]`'s stdout.
Result<std::string> RunInfo(const std::string& engine_binary, std::vector<std::string> extra) {
  if (!std::filesystem::exists(engine_binary)) {
    return NotFoundError("cannot ask spark-engine what it supports: " + engine_binary +
                         " does not exist (build it with ./scripts/build.sh, or pass --engine)");
  }
  std::vector<std::string> argv = {engine_binary, "info", "--json"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  ProcessRunner runner;
  SPARK_ASSIGN_OR_RETURN(CommandResult r, runner.Run(argv));
  if (r.exit_code != 0) {
    return InternalError(engine_binary + " info --json exited with " +
                         std::to_string(r.exit_code) + ": " + r.err);
  }
  return r.out;
}

Result<EngineCapabilities> QueryEngine(const std::string& engine_binary) {
  SPARK_ASSIGN_OR_RETURN(std::string out, RunInfo(engine_binary, {}));
  return ParseEngineInfo(out, engine_binary);
}

Result<ModelCheck> ParseModelInfo(std::string_view json_text, const std::string& source) {
  const json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  const std::string what = source + " info --json --model";
  if (!doc.is_object() || !doc.contains("model") || !doc["model"].is_object()) {
    return InvalidArgumentError(what + ": no \"model\" object (an older spark-engine?)");
  }
  const json& m = doc["model"];
  ModelCheck check;
  if (m.contains("model_type")) {
    SPARK_RETURN_IF_ERROR(String(m, "model_type", what, &check.model_type));
    SPARK_RETURN_IF_ERROR(String(m, "family", what, &check.family));
    SPARK_RETURN_IF_ERROR(Strings(m, "backends", what, &check.backends));
  }
  if (!m.contains("problems") || !m["problems"].is_array()) {
    return InvalidArgumentError(what + ".problems: missing or not a list");
  }
  for (const json& p : m["problems"]) {
    std::string key, message;
    SPARK_RETURN_IF_ERROR(String(p, "key", what + ".problems[]", &key));
    SPARK_RETURN_IF_ERROR(String(p, "message", what + ".problems[]", &message));
    check.problems.push_back({key == "tp" ? "engine.tp" : "model.path", message});
  }
  return check;
}

Result<ModelCheck> QueryModel(const std::string& engine_binary, const std::string& dir, int tp) {
  SPARK_ASSIGN_OR_RETURN(std::string out,
                         RunInfo(engine_binary, {"--model", dir, "--tp", std::to_string(tp)}));
  return ParseModelInfo(out, engine_binary);
}

void ValidateAgainstModel(const Profile& p, const ModelCheck& model, FieldErrors* errors) {
  for (const FieldError& e : model.problems) errors->Add(e.path, e.message);
  if (!model.family.empty() && p.engine.backend != "auto" &&
      !Contains(model.backends, p.engine.backend)) {
    errors->Add("engine.backend", "the checkpoint at " + p.model.path + " is " + model.family +
                                      " (model_type " + model.model_type + "), which runs on " +
                                      Join(model.backends) + ", not " + p.engine.backend);
  }
}

void ValidateAgainstEngine(const Profile& p, const EngineCapabilities& engine,
                           FieldErrors* errors) {
  const EngineSpec& e = p.engine;
  if (e.backend != "auto" && !Contains(engine.backends, e.backend)) {
    errors->Add("engine.backend", "'" + e.backend + "' is not a backend of " + engine.source +
                                      " (it has " + Join(engine.backends) + ")" +
                                      DidYouMean(e.backend, engine.backends));
  }
  if (const std::string kv(KvCacheDtypeName(e.kv_cache.dtype)); kv != "auto") {
    const std::vector<std::string> kept = engine.KvDtypes();
    if (!Contains(kept, kv)) {
      errors->Add("engine.kv_cache.dtype",
                  "'" + kv + "' is not a KV cache type of " + engine.source + " (it keeps " +
                      Join(kept) + "); use one of those, or auto (the engine's choice)");
    }
  }
  // mtp is refused by Validate already; a method it accepts must be in this engine.
  if ((e.speculative.method == "ngram" || e.speculative.method == "dspark") &&
      !Contains(engine.speculative_methods, e.speculative.method)) {
    errors->Add("engine.speculative.method",
                "speculative decoding with '" + e.speculative.method + "' is not implemented in " +
                    engine.source + " (" +
                    (engine.speculative_methods.empty()
                         ? std::string("it has no speculative decoding yet")
                         : "it runs " + Join(engine.speculative_methods)) +
                    "); remove engine.speculative or set method: none");
  }
  for (const auto& [name, value] : p.env) {
    if (engine.ReadsEnv(name)) continue;
    std::string reads = Join(engine.env_variables);
    for (const std::string& prefix : engine.env_prefixes) {
      reads += (reads.empty() ? "" : ", ") + prefix + "*";
    }
    errors->Add("env." + name, "nothing in " + engine.source + " reads " + name + " (it reads " +
                                   (reads.empty() ? std::string("none") : reads) +
                                   "); remove the entry");
  }
  const std::vector<std::string> parsers = engine.Parsers();
  for (auto [key, value] : {std::pair{"reasoning_parser", &e.reasoning_parser},
                            std::pair{"tool_parser", &e.tool_parser}}) {
    if (!value->empty() && !Contains(parsers, *value)) {
      errors->Add(std::string("engine.") + key, "'" + *value + "' is not a parser of this "
                                                "spark-engine (" + Join(parsers) + ")" +
                                                    DidYouMean(*value, parsers));
    }
  }
}

}  // namespace spark::profile
