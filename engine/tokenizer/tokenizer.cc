#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <unordered_map>

#include "base/logging.h"
#include "engine/tokenizer/added_tokens.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/tokenizer_spec.h"
#include "engine/tokenizer/utf8.h"

namespace spark::tokenizer {

struct Tokenizer::Impl {
  ByteLevelAlphabet alphabet;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  Bpe bpe;
  AddedTokenMatcher raw_matcher;         // added tokens matched before normalisation
  AddedTokenMatcher normalized_matcher;  // added tokens matched in normalised text
  std::unordered_map<std::string, int32_t> added_ids;
  std::unordered_map<int32_t, std::string> added_contents;
  std::vector<std::string> decode_bytes;  // by id
  std::vector<uint8_t> kind;              // by id: 0 undefined, 1 model, 2 added, 3 special
  std::optional<int32_t> bos, eos, pad;
  bool add_bos = false, add_eos = false;
  std::string chat_template;

  Status FillVocabulary(const TokenizerSpec& spec);
  Result<std::optional<int32_t>> ConfigTokenId(const std::optional<std::string>& token,
                                               const char* key) const;
  void EncodeWords(std::string_view text, std::vector<int32_t>& ids) const;
  void EncodeNormalized(std::string_view text, std::vector<int32_t>& ids) const;
  void EncodeSegment(std::string_view text, std::vector<int32_t>& ids) const;
};

Status Tokenizer::Impl::FillVocabulary(const TokenizerSpec& spec) {
  Impl& impl = *this;
  int32_t size = static_cast<int32_t>(impl.bpe.token_bytes().size());
  for (const AddedTokenSpec& t : spec.added_tokens) size = std::max(size, t.id + 1);
  impl.decode_bytes.assign(size, std::string());
  impl.kind.assign(size, 0);
  for (size_t id = 0; id < impl.bpe.tokens().size(); ++id) {
    if (impl.bpe.tokens()[id].empty()) continue;
    impl.decode_bytes[id] = impl.bpe.token_bytes()[id];
    impl.kind[id] = 1;
  }
  std::vector<std::pair<std::string, int32_t>> raw, normalized;
  for (const AddedTokenSpec& t : spec.added_tokens) {
    impl.added_ids[t.content] = t.id;
    impl.added_contents[t.id] = t.content;
    // Hugging Face's ByteLevel decoder maps an added token's characters through the byte
    // alphabet when it can, and keeps its raw UTF-8 otherwise.
    impl.decode_bytes[t.id] = impl.alphabet.DecodeOrRaw(t.content);
    impl.kind[t.id] = t.special ? 3 : 2;
    (t.normalized && !impl.normalizer.is_identity() ? normalized : raw).emplace_back(t.content, t.id);
  }
  impl.raw_matcher = AddedTokenMatcher(raw);
  impl.normalized_matcher = AddedTokenMatcher(normalized);
  return Status::Ok();
}

Result<std::optional<int32_t>> Tokenizer::Impl::ConfigTokenId(
    const std::optional<std::string>& token, const char* key) const {
  const Impl& impl = *this;
  if (!token) return std::optional<int32_t>();
  auto it = impl.added_ids.find(*token);
  if (it != impl.added_ids.end()) return std::optional<int32_t>(it->second);
  const int32_t id = impl.bpe.IdOfBytes(impl.alphabet.DecodeOrRaw(*token));
  if (id < 0) {
    return InvalidArgumentError(std::string("tokenizer_config.json: ") + key + ": token '" +
                                *token + "' is not in tokenizer.json");
  }
  return std::optional<int32_t>(id);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::FromDir(const std::filesystem::path& dir) {
  SPARK_ASSIGN_OR_RETURN(TokenizerSpec spec, LoadTokenizerSpec(dir));
  Result<Tokenizer> tokenizer = FromSpec(spec);
  if (!tokenizer.ok()) return tokenizer.status().WithContext(dir.string());
  return tokenizer;
}

Result<Tokenizer> Tokenizer::FromSpec(const TokenizerSpec& spec) {
  auto impl = std::make_unique<Impl>();
  SPARK_ASSIGN_OR_RETURN(impl->normalizer, Normalizer::Create(spec.normal_forms));
  std::vector<RegexSplit> steps;
  for (size_t i = 0; i < spec.splits.size(); ++i) {
    Result<RegexSplit> step =
        RegexSplit::Create(spec.splits[i].pattern, spec.splits[i].is_regex, spec.splits[i].behavior);
    if (!step.ok()) {
      return step.status().WithContext("tokenizer.json: pre_tokenizer split #" + std::to_string(i) +
                                       " '" + spec.splits[i].pattern + "'");
    }
    steps.push_back(std::move(*step));
  }
  impl->pre_tokenizer = PreTokenizer(std::move(steps));
  Result<Bpe> bpe = Bpe::Create(spec.bpe, impl->alphabet);
  if (!bpe.ok()) return bpe.status().WithContext("tokenizer.json");
  impl->bpe = std::move(*bpe);
  SPARK_RETURN_IF_ERROR(impl->FillVocabulary(spec));
  SPARK_ASSIGN_OR_RETURN(impl->bos, impl->ConfigTokenId(spec.bos_token, "bos_token"));
  SPARK_ASSIGN_OR_RETURN(impl->eos, impl->ConfigTokenId(spec.eos_token, "eos_token"));
  SPARK_ASSIGN_OR_RETURN(impl->pad, impl->ConfigTokenId(spec.pad_token, "pad_token"));
  impl->add_bos = spec.add_bos_token;
  impl->add_eos = spec.add_eos_token;
  impl->chat_template = spec.chat_template;
  return Tokenizer(std::move(impl));
}

void Tokenizer::Impl::EncodeWords(std::string_view text, std::vector<int32_t>& ids) const {
  Result<std::vector<std::string_view>> words = pre_tokenizer.Split(text);
  if (!words.ok()) {
    // Only PCRE2 resource limits get here; encoding the span as one word keeps the text.
    Logger("engine.tokenizer")->warn("{}; encoding {} bytes unsplit", words.status().ToString(),
                                     text.size());
    words = std::vector<std::string_view>{text};
  }
  for (std::string_view word : *words) bpe.Encode(word, ids);
}

void Tokenizer::Impl::EncodeNormalized(std::string_view text, std::vector<int32_t>& ids) const {
  size_t pos = 0;
  for (const AddedTokenMatcher::Match& m : normalized_matcher.FindAll(text)) {
    EncodeWords(text.substr(pos, m.pos - pos), ids);
    ids.push_back(m.id);
    pos = m.pos + m.len;
  }
  EncodeWords(text.substr(pos), ids);
}

void Tokenizer::Impl::EncodeSegment(std::string_view text, std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  if (normalizer.is_identity()) return EncodeNormalized(text, ids);
  Result<std::string> normalized = normalizer.Apply(text);
  if (!normalized.ok()) {
    Logger("engine.tokenizer")->warn("{}; encoding unnormalised", normalized.status().ToString());
    return EncodeNormalized(text, ids);
  }
  EncodeNormalized(*normalized, ids);
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special) const {
  std::string repaired;
  if (!IsValidUtf8(text)) text = repaired = Utf8Lossy(text);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (add_special && impl_->add_bos && impl_->bos) ids.push_back(*impl_->bos);
  size_t pos = 0;
  for (const AddedTokenMatcher::Match& m : impl_->raw_matcher.FindAll(text)) {
    impl_->EncodeSegment(text.substr(pos, m.pos - pos), ids);
    ids.push_back(m.id);
    pos = m.pos + m.len;
  }
  impl_->EncodeSegment(text.substr(pos), ids);
  if (add_special && impl_->add_eos && impl_->eos) ids.push_back(*impl_->eos);
  return ids;
}

std::vector<int32_t> Tokenizer::EncodePlain(std::string_view text) const {
  std::string repaired;
  if (!IsValidUtf8(text)) text = repaired = Utf8Lossy(text);
  std::vector<int32_t> ids;
  if (impl_->normalizer.is_identity()) {
    impl_->EncodeWords(text, ids);
    return ids;
  }
  Result<std::string> normalized = impl_->normalizer.Apply(text);
  impl_->EncodeWords(normalized.ok() ? std::string_view(*normalized) : text, ids);
  return ids;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (IsValidId(id)) bytes += impl_->decode_bytes[id];
  }
  return Utf8Lossy(bytes);
}

const std::string& Tokenizer::TokenBytes(int32_t id) const {
  static const std::string kEmpty;
  return IsValidId(id) ? impl_->decode_bytes[id] : kEmpty;
}

bool Tokenizer::IsValidId(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->kind[id] != 0;
}

bool Tokenizer::IsSpecial(int32_t id) const { return IsValidId(id) && impl_->kind[id] == 3; }

bool Tokenizer::IsAdded(int32_t id) const { return IsValidId(id) && impl_->kind[id] >= 2; }

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  auto it = impl_->added_ids.find(std::string(token));
  if (it != impl_->added_ids.end()) return it->second;
  std::optional<std::string> bytes = impl_->alphabet.Decode(token);
  const int32_t id = bytes ? impl_->bpe.IdOfBytes(*bytes) : -1;
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

std::optional<std::string> Tokenizer::IdToToken(int32_t id) const {
  if (!IsValidId(id)) return std::nullopt;
  auto it = impl_->added_contents.find(id);
  if (it != impl_->added_contents.end()) return it->second;
  return impl_->bpe.tokens()[id];
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->kind.size()); }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos; }
std::optional<int32_t> Tokenizer::pad_id() const { return impl_->pad; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

}  // namespace spark::tokenizer
