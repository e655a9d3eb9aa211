#include "engine/tokenizer/bpe.h"

#include <algorithm>
#include <mutex>
#include <queue>

namespace spark::tokenizer {

// Open-addressing hash table (pair of ids) -> (rank, merged id): the hot lookup of BPE.
struct Bpe::MergeTable {
  struct Slot {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    int32_t merged = 0;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  std::vector<Slot> slots;
  uint64_t mask = 0;

  explicit MergeTable(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    slots.resize(cap);
    mask = cap - 1;
  }
  static uint64_t Key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  static uint64_t Hash(uint64_t key) { return (key * 0x9E3779B97F4A7C15ULL) >> 17; }

  // A repeated pair keeps the later rule, as Hugging Face's merge map does.
  void Insert(int32_t a, int32_t b, int32_t rank, int32_t merged) {
    const uint64_t key = Key(a, b);
    for (uint64_t i = Hash(key) & mask;; i = (i + 1) & mask) {
      if (slots[i].key == key || slots[i].key == kEmpty) {
        slots[i] = {key, rank, merged};
        return;
      }
    }
  }
  const Slot* Find(int32_t a, int32_t b) const {
    const uint64_t key = Key(a, b);
    for (uint64_t i = Hash(key) & mask;; i = (i + 1) & mask) {
      if (slots[i].key == key) return &slots[i];
      if (slots[i].key == kEmpty) return nullptr;
    }
  }
};

// Bounded word -> ids cache. When full it is cleared: simple, and the hot words of the next
// stretch of text refill it at once.
struct Bpe::Cache {
  // Lookups by string_view, without building a std::string per word.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  static constexpr size_t kMaxWordBytes = 256;
  size_t capacity = 0;
  std::mutex mu;
  std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> words;
};

Bpe::Bpe() = default;
Bpe::Bpe(Bpe&&) noexcept = default;
Bpe& Bpe::operator=(Bpe&&) noexcept = default;
Bpe::~Bpe() = default;

Result<Bpe> Bpe::Create(const BpeSpec& spec, const ByteLevelAlphabet& alphabet) {
  Bpe bpe;
  int32_t max_id = -1;
  for (const auto& [token, id] : spec.vocab) {
    if (id < 0) return InvalidArgumentError("model.vocab: token '" + token + "' has negative id");
    max_id = std::max(max_id, id);
  }
  bpe.tokens_.resize(max_id + 1);
  bpe.token_bytes_.resize(max_id + 1);
  for (const auto& [token, id] : spec.vocab) {
    bpe.tokens_[id] = token;
    std::optional<std::string> bytes = alphabet.Decode(token);
    bpe.token_bytes_[id] = bytes ? *bytes : token;
    if (bytes) bpe.id_of_bytes_.emplace(std::move(*bytes), id);
  }
  for (int b = 0; b < 256; ++b) {
    const int32_t id = bpe.IdOfBytes(std::string(1, static_cast<char>(b)));
    if (id < 0) {
      return InvalidArgumentError("model.vocab: no token for byte " + std::to_string(b) + " ('" +
                                  alphabet.CharOf(b) + "'); a byte-level vocabulary needs all 256");
    }
    bpe.byte_ids_[b] = id;
  }
  bpe.merges_ = std::make_unique<MergeTable>(spec.merges.size());
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [left, right] = spec.merges[rank];
    const std::optional<std::string> lb = alphabet.Decode(left), rb = alphabet.Decode(right);
    if (!lb || !rb) continue;  // parts outside the byte alphabet can never be formed
    const int32_t a = bpe.IdOfBytes(*lb), b = bpe.IdOfBytes(*rb), m = bpe.IdOfBytes(*lb + *rb);
    if (a < 0 || b < 0 || m < 0) {
      return InvalidArgumentError("model.merges[" + std::to_string(rank) + "] '" + left + " " +
                                  right + "': part or result is not in model.vocab");
    }
    bpe.merges_->Insert(a, b, static_cast<int32_t>(rank), m);
  }
  bpe.ignore_merges_ = spec.ignore_merges;
  bpe.cache_ = std::make_unique<Cache>();
  bpe.cache_->capacity = spec.cache_capacity;
  return bpe;
}

int32_t Bpe::IdOfBytes(std::string_view bytes) const {
  auto it = id_of_bytes_.find(std::string(bytes));
  return it == id_of_bytes_.end() ? -1 : it->second;
}

void Bpe::Encode(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  const bool cacheable = cache_->capacity > 0 && word.size() <= Cache::kMaxWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->mu);
    auto it = cache_->words.find(word);
    if (it != cache_->words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  Merge(word, out);
  if (!cacheable) return;
  std::lock_guard<std::mutex> lock(cache_->mu);
  if (cache_->words.size() >= cache_->capacity) cache_->words.clear();
  cache_->words.emplace(std::string(word), std::vector<int32_t>(out.begin() + first, out.end()));
}

void Bpe::Merge(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (const int32_t id = IdOfBytes(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  struct Symbol {
    int32_t id, prev, next;
    bool alive;
  };
  struct Candidate {
    int32_t rank, pos, merged;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  const int32_t n = static_cast<int32_t>(word.size());
  std::vector<Symbol> sym(n);
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  for (int32_t i = 0; i < n; ++i) {
    sym[i] = {byte_ids_[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, true};
  }
  auto consider = [&](int32_t pos) {
    if (pos < 0 || sym[pos].next < 0) return;
    if (const MergeTable::Slot* s = merges_->Find(sym[pos].id, sym[sym[pos].next].id)) {
      queue.push({s->rank, pos, s->merged});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = sym[top.pos];
    if (!left.alive || left.next < 0) continue;
    const MergeTable::Slot* s = merges_->Find(left.id, sym[left.next].id);
    if (s == nullptr || s->merged != top.merged) continue;  // stale candidate
    Symbol& right = sym[left.next];
    right.alive = false;
    left.id = top.merged;
    left.next = right.next;
    if (left.next >= 0) sym[left.next].prev = top.pos;
    consider(left.prev);
    consider(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace spark::tokenizer
