#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/field_errors.h"
#include "engine/core/config_reader.h"
#include "engine/model/deepseek_v4/deepseek_v4_family.h"
#include "engine/model/deepseek_v41/deepseek_v41_family.h"
#include "engine/model/model_family.h"
#include "engine/model/qwen3/qwen3_family.h"

namespace spark::engine::model {
namespace {

using nlohmann::json;

// The table. Order: what `spark-engine info` lists.
const ModelFamily* const kFamilies[] = {
    &qwen3::kQwen3Family,
    &dsv4::kDeepseekV4Family,
    &dsv41::kDeepseekV41Family,
};

// generation_config.json may list more stop tokens than config.json (Qwen3: <|im_end|> and
// <|endoftext|>); they are added to eos_token_ids. A missing or unreadable file adds nothing.
void MergeGenerationEos(const std::filesystem::path& dir, core::ModelConfig* c) {
  std::ifstream in(dir / "generation_config.json");
  if (!in) return;
  std::stringstream text;
  text << in.rdbuf();
  const json doc = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return;
  FieldErrors ignored;
  std::vector<int> ids;
  core::ConfigReader(doc, &ignored).IntList("eos_token_id", &ids);
  for (int id : ids) {
    if (std::find(c->eos_token_ids.begin(), c->eos_token_ids.end(), id) == c->eos_token_ids.end()) {
      c->eos_token_ids.push_back(id);
    }
  }
}

}  // namespace

std::span<const ModelFamily* const> ModelFamilies() { return kFamilies; }

const ModelFamily* FindModelFamily(std::string_view model_type) {
  for (const ModelFamily* f : kFamilies) {
    for (std::string_view t : f->model_types) {
      if (t == model_type) return f;
    }
  }
  return nullptr;
}

std::string KnownModelTypes() {
  std::string out;
  for (const ModelFamily* f : kFamilies) {
    for (std::string_view t : f->model_types) out += (out.empty() ? "" : ", ") + std::string(t);
  }
  return out;
}

Result<core::ModelConfig> ParseModelConfig(std::string_view json_text, const std::string& path) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& ex) {
    return InvalidArgumentError(path + ": not valid JSON (" + ex.what() + ")");
  }
  if (!doc.is_object()) return InvalidArgumentError(path + ": must hold a JSON object");
  if (!doc.contains("model_type") || !doc["model_type"].is_string()) {
    return InvalidArgumentError(path + ": model_type: missing; expected one of " +
                                KnownModelTypes());
  }
  const std::string type = doc["model_type"].get<std::string>();
  const ModelFamily* family = FindModelFamily(type);
  if (family == nullptr) {
    return UnimplementedError(path + ": model_type: \"" + type +
                              "\" is not supported (supported: " + KnownModelTypes() + ")");
  }
  return family->parse_config(doc, path);
}

Result<core::ModelConfig> LoadModelConfig(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  std::ifstream in(path);
  if (!in) return NotFoundError(path + ": cannot read; --model must name a checkpoint directory");
  std::stringstream text;
  text << in.rdbuf();
  SPARK_ASSIGN_OR_RETURN(core::ModelConfig config, ParseModelConfig(text.str(), path));
  MergeGenerationEos(dir, &config);
  return config;
}

Status CheckSupported(const ModelFamily& family, const std::string& backend_name,
                      const ModelOptions& options) {
  auto dtype_name = [](backend::DType t) { return backend::DTypeName(t); };
  auto or_list = [](auto items, auto name) {
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      out += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + std::string(name(items[i]));
    }
    return out;
  };
  const std::string what(family.name);
  if (std::find(family.backends.begin(), family.backends.end(), backend_name) ==
      family.backends.end()) {
    return UnimplementedError(
        what + " runs on the " + or_list(family.backends, [](std::string_view b) { return b; }) +
        " backend only, not '" + backend_name + "' (--backend)");
  }
  const auto has = [](std::span<const backend::DType> list, backend::DType t) {
    return std::find(list.begin(), list.end(), t) != list.end();
  };
  if (!has(family.weight_dtypes, options.weight_dtype)) {
    return InvalidArgumentError(what + " keeps " + or_list(family.weight_dtypes, dtype_name) +
                                " weights only (weight type " + dtype_name(options.weight_dtype) +
                                " asked); set --weight-dtype to one of them");
  }
  if (options.load_draft && family.draft_method.empty()) {
    return UnimplementedError(what + " checkpoints carry no draft model of their own (the dspark "
                              "method is DeepSeek-V4.1's); use speculative method ngram");
  }
  if (!has(family.kv_dtypes, options.kv_dtype)) {
    return InvalidArgumentError(what + " keeps an " + or_list(family.kv_dtypes, dtype_name) +
                                " KV cache only (" + dtype_name(options.kv_dtype) +
                                " asked); set --kv-dtype to one of them");
  }
  return Status::Ok();
}

}  // namespace spark::engine::model
