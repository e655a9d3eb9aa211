// Byte-level BPE model (tokenizer.json "model" of type BPE): turns one pre-tokenized word into
// token ids by applying merges in rank order, lowest rank first and leftmost first on ties, as
// Hugging Face tokenizers does. Results are cached per word in a bounded cache.
// Thread-safety: Encode may be called from any thread (the cache is guarded by a mutex).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/tokenizer/byte_level.h"

namespace spark::tokenizer {

struct BpeSpec {
  // Byte-level token string -> id, as in tokenizer.json model.vocab.
  std::vector<std::pair<std::string, int32_t>> vocab;
  // Merge rules in rank order (rank = index), each a pair of byte-level token strings.
  std::vector<std::pair<std::string, std::string>> merges;
  // When true a word that is itself a vocabulary token is not merged piecewise.
  bool ignore_merges = false;
  // Words cached at most; 0 disables the cache.
  size_t cache_capacity = 1 << 16;
};

class Bpe {
 public:
  // Returns InvalidArgument naming the offending token or merge (the caller adds the file name):
  // a byte without a vocabulary token, a merge whose parts or result are not in the vocabulary.
  static Result<Bpe> Create(const BpeSpec& spec, const ByteLevelAlphabet& alphabet);

  Bpe();  // empty model; use Create
  Bpe(Bpe&&) noexcept;
  Bpe& operator=(Bpe&&) noexcept;
  ~Bpe();

  // Appends the ids of `word` (raw bytes) to `out`.
  void Encode(std::string_view word, std::vector<int32_t>& out) const;

  // Id of the token whose bytes are `bytes`, or -1.
  int32_t IdOfBytes(std::string_view bytes) const;

  // Byte-level token strings by id ("" for ids the model does not define); bytes by id.
  const std::vector<std::string>& tokens() const { return tokens_; }
  const std::vector<std::string>& token_bytes() const { return token_bytes_; }

 private:
  void Merge(std::string_view word, std::vector<int32_t>& out) const;

  struct MergeTable;
  struct Cache;
  std::vector<std::string> tokens_;
  std::vector<std::string> token_bytes_;
  std::unordered_map<std::string, int32_t> id_of_bytes_;
  int32_t byte_ids_[256] = {};
  bool ignore_merges_ = false;
  std::unique_ptr<MergeTable> merges_;
  std::unique_ptr<Cache> cache_;
};

}  // namespace spark::tokenizer
