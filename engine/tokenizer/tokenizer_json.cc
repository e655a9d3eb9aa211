// Adapter between the JSON files of a Hugging Face tokenizer and TokenizerSpec. nlohmann
// exceptions stop here; every error names the file and the key.
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer_spec.h"

namespace spark::tokenizer {
namespace {

using nlohmann::json;

// Error context: the file and the key path being read.
struct Where {
  const std::string& file;
  std::string key;
  Where At(const std::string& sub) const { return {file, key.empty() ? sub : key + "." + sub}; }
  Where Index(size_t i) const { return {file, key + "[" + std::to_string(i) + "]"}; }
  Status Invalid(const std::string& what) const {
    return InvalidArgumentError(file + ": " + key + ": " + what);
  }
  Status Unsupported(const std::string& what) const {
    return UnimplementedError(file + ": " + key + ": " + what);
  }
};

Result<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path.string() + ": cannot open (does the directory hold it?)");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Result<std::string> GetString(const json& j, const Where& w) {
  if (!j.is_string()) return w.Invalid("expected a string, found " + std::string(j.type_name()));
  return j.get<std::string>();
}

Result<const json*> Member(const json& obj, const std::string& name, const Where& w) {
  if (!obj.is_object()) return w.Invalid("expected an object");
  auto it = obj.find(name);
  if (it == obj.end()) return w.At(name).Invalid("missing key");
  return &*it;
}

bool BoolOr(const json& obj, const char* name, bool fallback) {
  auto it = obj.find(name);
  return it != obj.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

Status ParseNormalizer(const json& j, const Where& w, std::vector<NormalForm>& forms) {
  if (j.is_null()) return Status::Ok();
  SPARK_ASSIGN_OR_RETURN(const json* type_json, Member(j, "type", w));
  SPARK_ASSIGN_OR_RETURN(std::string type, GetString(*type_json, w.At("type")));
  if (type == "Sequence") {
    SPARK_ASSIGN_OR_RETURN(const json* list, Member(j, "normalizers", w));
    if (!list->is_array()) return w.At("normalizers").Invalid("expected an array");
    for (size_t i = 0; i < list->size(); ++i) {
      SPARK_RETURN_IF_ERROR(ParseNormalizer((*list)[i], w.At("normalizers").Index(i), forms));
    }
    return Status::Ok();
  }
  static const std::pair<const char*, NormalForm> kForms[] = {
      {"NFC", NormalForm::kNfc}, {"NFD", NormalForm::kNfd},
      {"NFKC", NormalForm::kNfkc}, {"NFKD", NormalForm::kNfkd}};
  for (const auto& [name, form] : kForms) {
    if (type == name) {
      forms.push_back(form);
      return Status::Ok();
    }
  }
  return w.At("type").Unsupported("normalizer '" + type +
                                  "' is not supported (supported: NFC, NFD, NFKC, NFKD, Sequence)");
}

Status ParseSplit(const json& j, const Where& w, std::vector<SplitSpec>& splits) {
  SplitSpec split;
  SPARK_ASSIGN_OR_RETURN(const json* pattern, Member(j, "pattern", w));
  if (pattern->is_object() && pattern->contains("Regex")) {
    SPARK_ASSIGN_OR_RETURN(split.pattern, GetString((*pattern)["Regex"], w.At("pattern.Regex")));
  } else if (pattern->is_object() && pattern->contains("String")) {
    SPARK_ASSIGN_OR_RETURN(split.pattern, GetString((*pattern)["String"], w.At("pattern.String")));
    split.is_regex = false;
  } else {
    return w.At("pattern").Invalid("expected {\"Regex\": ...} or {\"String\": ...}");
  }
  SPARK_ASSIGN_OR_RETURN(const json* behavior_json, Member(j, "behavior", w));
  SPARK_ASSIGN_OR_RETURN(std::string behavior, GetString(*behavior_json, w.At("behavior")));
  if (behavior == "Removed") {
    split.behavior = SplitBehavior::kRemoved;
  } else if (behavior != "Isolated") {
    return w.At("behavior").Unsupported("'" + behavior + "' (supported: Isolated, Removed)");
  }
  if (BoolOr(j, "invert", false)) return w.At("invert").Unsupported("true is not supported");
  splits.push_back(std::move(split));
  return Status::Ok();
}

Status ParsePreTokenizer(const json& j, const Where& w, std::vector<SplitSpec>& splits) {
  if (j.is_null()) return Status::Ok();
  SPARK_ASSIGN_OR_RETURN(const json* type_json, Member(j, "type", w));
  SPARK_ASSIGN_OR_RETURN(std::string type, GetString(*type_json, w.At("type")));
  if (type == "Sequence") {
    SPARK_ASSIGN_OR_RETURN(const json* list, Member(j, "pretokenizers", w));
    if (!list->is_array()) return w.At("pretokenizers").Invalid("expected an array");
    for (size_t i = 0; i < list->size(); ++i) {
      SPARK_RETURN_IF_ERROR(ParsePreTokenizer((*list)[i], w.At("pretokenizers").Index(i), splits));
    }
    return Status::Ok();
  }
  if (type == "Split") return ParseSplit(j, w, splits);
  if (type == "ByteLevel") {
    if (BoolOr(j, "add_prefix_space", false)) {
      return w.At("add_prefix_space").Unsupported("true is not supported");
    }
    if (BoolOr(j, "use_regex", true)) splits.push_back({kGpt2SplitPattern, true});
    return Status::Ok();
  }
  return w.At("type").Unsupported("pre-tokenizer '" + type +
                                  "' is not supported (supported: Sequence, Split, ByteLevel)");
}

Status ParseMerges(const json& merges, const Where& w, BpeSpec& bpe) {
  if (!merges.is_array()) return w.Invalid("expected an array");
  bpe.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ', 1);
      if (space == std::string::npos) return w.Index(i).Invalid("expected \"left right\"");
      bpe.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      bpe.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return w.Index(i).Invalid("expected \"left right\" or [\"left\", \"right\"]");
    }
  }
  return Status::Ok();
}

Status ParseModel(const json& j, const Where& w, BpeSpec& bpe) {
  SPARK_ASSIGN_OR_RETURN(const json* type_json, Member(j, "type", w));
  SPARK_ASSIGN_OR_RETURN(std::string type, GetString(*type_json, w.At("type")));
  if (type != "BPE") return w.At("type").Unsupported("model '" + type + "' (supported: BPE)");
  if (BoolOr(j, "byte_fallback", false)) return w.At("byte_fallback").Unsupported("true");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = j.find(key);
    if (it != j.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty())) {
      return w.At(key).Unsupported("a non-empty affix is not supported");
    }
  }
  SPARK_ASSIGN_OR_RETURN(const json* vocab, Member(j, "vocab", w));
  if (!vocab->is_object()) return w.At("vocab").Invalid("expected an object token -> id");
  bpe.vocab.reserve(vocab->size());
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_integer()) {
      return w.At("vocab").Invalid("token '" + it.key() + "' has a non-integer id");
    }
    bpe.vocab.emplace_back(it.key(), it.value().get<int32_t>());
  }
  SPARK_ASSIGN_OR_RETURN(const json* merges, Member(j, "merges", w));
  SPARK_RETURN_IF_ERROR(ParseMerges(*merges, w.At("merges"), bpe));
  bpe.ignore_merges = BoolOr(j, "ignore_merges", false);
  return Status::Ok();
}

Status ParseAddedToken(const json& t, const Where& w, std::vector<AddedTokenSpec>& tokens) {
  AddedTokenSpec spec;
  SPARK_ASSIGN_OR_RETURN(const json* id, Member(t, "id", w));
  if (!id->is_number_integer() || id->get<int64_t>() < 0) {
    return w.At("id").Invalid("expected a non-negative integer");
  }
  spec.id = id->get<int32_t>();
  SPARK_ASSIGN_OR_RETURN(const json* content, Member(t, "content", w));
  SPARK_ASSIGN_OR_RETURN(spec.content, GetString(*content, w.At("content")));
  spec.special = BoolOr(t, "special", false);
  spec.normalized = BoolOr(t, "normalized", !spec.special);
  for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
    if (BoolOr(t, flag, false)) {
      return w.At(flag).Unsupported("token '" + spec.content + "': true is not supported");
    }
  }
  tokens.push_back(std::move(spec));
  return Status::Ok();
}

Status ParseDecoder(const json& j, const Where& w) {
  SPARK_ASSIGN_OR_RETURN(const json* type_json, Member(j, "type", w));
  SPARK_ASSIGN_OR_RETURN(std::string type, GetString(*type_json, w.At("type")));
  if (type != "ByteLevel") return w.At("type").Unsupported("decoder '" + type + "' (supported: ByteLevel)");
  return Status::Ok();
}

Status ParseRoot(const json& root, const Where& w, TokenizerSpec& spec) {
  if (!root.is_object()) return w.Invalid("expected a JSON object at the top level");
  SPARK_RETURN_IF_ERROR(ParseNormalizer(root.value("normalizer", json()), w.At("normalizer"),
                                        spec.normal_forms));
  SPARK_RETURN_IF_ERROR(
      ParsePreTokenizer(root.value("pre_tokenizer", json()), w.At("pre_tokenizer"), spec.splits));
  SPARK_ASSIGN_OR_RETURN(const json* model, Member(root, "model", w));
  SPARK_RETURN_IF_ERROR(ParseModel(*model, w.At("model"), spec.bpe));
  SPARK_ASSIGN_OR_RETURN(const json* decoder, Member(root, "decoder", w));
  SPARK_RETURN_IF_ERROR(ParseDecoder(*decoder, w.At("decoder")));
  const json added = root.value("added_tokens", json::array());
  if (!added.is_array()) return w.At("added_tokens").Invalid("expected an array");
  for (size_t i = 0; i < added.size(); ++i) {
    SPARK_RETURN_IF_ERROR(ParseAddedToken(added[i], w.At("added_tokens").Index(i), spec.added_tokens));
  }
  return Status::Ok();
}

// bos_token & co: a string, null, or an AddedToken object {"content": ...}.
Result<std::optional<std::string>> TokenText(const json& root, const char* key, const Where& w) {
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return std::optional<std::string>((*it)["content"].get<std::string>());
  }
  return w.At(key).Invalid("expected a string or {\"content\": string}");
}

Result<std::string> ChatTemplate(const json& root, const Where& w) {
  auto it = root.find("chat_template");
  if (it == root.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) return w.At("chat_template").Invalid("expected a string or a list");
  for (const json& named : *it) {  // [{"name": "default", "template": "..."}, ...]
    if (named.is_object() && named.value("name", "") == "default" && named.contains("template")) {
      return GetString(named["template"], w.At("chat_template"));
    }
  }
  return w.At("chat_template").Invalid("no template named 'default'");
}

}  // namespace

Status ParseTokenizerJson(const std::string& text, const std::string& file, TokenizerSpec& spec) {
  try {
    const json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (root.is_discarded()) {
      return InvalidArgumentError(file + ": not valid JSON (re-download the tokenizer files)");
    }
    return ParseRoot(root, Where{file, ""}, spec);
  } catch (const json::exception& e) {
    return InvalidArgumentError(file + ": " + e.what());
  }
}

Status ParseTokenizerConfig(const std::string& text, const std::string& file, TokenizerSpec& spec) {
  try {
    const json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (root.is_discarded() || !root.is_object()) {
      return InvalidArgumentError(file + ": not a valid JSON object");
    }
    const Where w{file, ""};
    SPARK_ASSIGN_OR_RETURN(spec.bos_token, TokenText(root, "bos_token", w));
    SPARK_ASSIGN_OR_RETURN(spec.eos_token, TokenText(root, "eos_token", w));
    SPARK_ASSIGN_OR_RETURN(spec.pad_token, TokenText(root, "pad_token", w));
    spec.add_bos_token = BoolOr(root, "add_bos_token", false);
    spec.add_eos_token = BoolOr(root, "add_eos_token", false);
    SPARK_ASSIGN_OR_RETURN(spec.chat_template, ChatTemplate(root, w));
    return Status::Ok();
  } catch (const json::exception& e) {
    return InvalidArgumentError(file + ": " + e.what());
  }
}

Result<TokenizerSpec> LoadTokenizerSpec(const std::filesystem::path& dir) {
  TokenizerSpec spec;
  const std::filesystem::path json_path = dir / "tokenizer.json";
  SPARK_ASSIGN_OR_RETURN(std::string text, ReadFile(json_path));
  SPARK_RETURN_IF_ERROR(ParseTokenizerJson(text, json_path.string(), spec));
  const std::filesystem::path config_path = dir / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    SPARK_ASSIGN_OR_RETURN(std::string config, ReadFile(config_path));
    SPARK_RETURN_IF_ERROR(ParseTokenizerConfig(config, config_path.string(), spec));
  }
  return spec;
}

}  // namespace spark::tokenizer
