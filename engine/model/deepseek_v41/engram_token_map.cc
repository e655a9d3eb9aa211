#include "engine/model/deepseek_v41/engram_token_map.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "engine/tokenizer/normalizer.h"

namespace spark::engine::model::dsv41 {
namespace {

constexpr char kTokenMapFile[] = "engram_token_map.txt";
constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD
constexpr char kSentinel[] = "\xEE\x80\x80";     // U+E000, keeps a lone space through Strip

std::string CollapseSpaces(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
      out += ' ';
      while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) ++i;
    } else {
      out += s[i++];
    }
  }
  return out;
}

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

Result<std::string> Key(const tokenizer::Normalizer& nf, const tokenizer::Tokenizer& tok,
                        int32_t id) {
  const int32_t one[] = {id};
  const std::string text = tok.Decode(one);
  if (text.find(kReplacement) != std::string::npos) return tok.IdToToken(id).value_or(text);
  SPARK_ASSIGN_OR_RETURN(std::string s, nf.Apply(text));
  s = CollapseSpaces(tokenizer::LowercaseChars(tokenizer::StripMarks(s)));
  if (s == " ") s = kSentinel;
  s = ReplaceAll(tokenizer::StripWhiteSpace(s), kSentinel, " ");
  return s.empty() ? text : s;
}

Result<std::vector<int32_t>> ReadMapFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError(path + ": cannot read");
  std::vector<int32_t> map;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    char* end = nullptr;
    const long v = std::strtol(line.c_str(), &end, 10);
    if (*end != '\0' || v < 0) {
      return InvalidArgumentError(path + ":" + std::to_string(map.size() + 1) + ": \"" + line +
                                  "\" is not a compressed token id");
    }
    map.push_back(static_cast<int32_t>(v));
  }
  return map;
}

}  // namespace

Result<std::vector<int32_t>> BuildCompressedTokenMap(const tokenizer::Tokenizer& tok) {
  SPARK_ASSIGN_OR_RETURN(
      tokenizer::Normalizer nf,
      tokenizer::Normalizer::Create({tokenizer::NormalForm::kNfkc, tokenizer::NormalForm::kNfd}));
  std::unordered_map<std::string, int32_t> ids;
  std::vector<int32_t> map(tok.vocab_size());
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    SPARK_ASSIGN_OR_RETURN(std::string key, Key(nf, tok, id));
    map[id] = ids.emplace(std::move(key), static_cast<int32_t>(ids.size())).first->second;
  }
  return map;
}

Result<std::vector<int32_t>> LoadCompressedTokenMap(const std::string& dir,
                                                    int compressed_vocab_size, int pad_id) {
  const std::filesystem::path root(dir);
  std::vector<int32_t> map;
  std::string source;
  if (std::filesystem::exists(root / "tokenizer.json")) {
    source = (root / "tokenizer.json").string();
    SPARK_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok, tokenizer::Tokenizer::FromDir(root));
    SPARK_ASSIGN_OR_RETURN(map, BuildCompressedTokenMap(tok));
  } else if (std::filesystem::exists(root / kTokenMapFile)) {
    source = (root / kTokenMapFile).string();
    SPARK_ASSIGN_OR_RETURN(map, ReadMapFile(source));
  } else {
    return NotFoundError(dir + ": no tokenizer.json (nor " + kTokenMapFile + "); the Engram " +
                         "layers (engram_layer_ids) hash the tokenizer's compressed token ids; " +
                         "pass the checkpoint's tokenizer directory (--tokenizer)");
  }
  const int32_t size = map.empty() ? 0 : *std::max_element(map.begin(), map.end()) + 1;
  if (size != compressed_vocab_size) {
    return InvalidArgumentError(
        source + ": the tokenizer-derived compressed vocabulary has " + std::to_string(size) +
        " ids but config.json's engram_compressed_vocab_size is " +
        std::to_string(compressed_vocab_size) +
        "; the Engram hashes would address the wrong rows (use the checkpoint's own tokenizer)");
  }
  if (pad_id < 0 || pad_id >= static_cast<int>(map.size())) {
    return InvalidArgumentError(source +
                                ": has no token id engram_pad_id = " + std::to_string(pad_id));
  }
  return map;
}

}  // namespace spark::engine::model::dsv41
