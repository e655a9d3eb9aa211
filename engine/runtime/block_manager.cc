#include "engine/runtime/block_manager.h"

#include <algorithm>
#include <string>

namespace spark::engine::runtime {

namespace {

constexpr uint64_t kFirstBlockSeed = 0x9e3779b97f4a7c15ull;

// splitmix64 finaliser: cheap and well mixed.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

BlockManager::BlockManager(const BlockManagerOptions& options)
    : block_size_(std::max(1, options.block_size)),
      prefix_caching_(options.enable_prefix_caching),
      blocks_(std::max(0, options.num_blocks)) {
  for (int32_t id = 0; id < num_blocks(); ++id) {
    blocks_[id].free_pos = free_list_.insert(free_list_.end(), id);
    blocks_[id].in_free_list = true;
  }
}

uint64_t BlockManager::HashBlock(uint64_t prev_hash, std::span<const int32_t> tokens) {
  uint64_t h = Mix(prev_hash ^ tokens.size());
  for (int32_t t : tokens) h = Mix(h ^ static_cast<uint32_t>(t));
  return h;
}

bool BlockManager::IsCached(int32_t id) const {
  const Block& b = blocks_[id];
  if (!b.hashed) return false;
  auto it = cached_.find(b.hash);
  return it != cached_.end() && it->second == id;
}

void BlockManager::TakeFromFreeList(int32_t id) {
  Block& b = blocks_[id];
  if (!b.in_free_list) return;
  free_list_.erase(b.free_pos);
  b.in_free_list = false;
}

int32_t BlockManager::AllocateBlock() {
  const int32_t id = free_list_.front();
  TakeFromFreeList(id);
  Block& b = blocks_[id];
  if (IsCached(id)) cached_.erase(b.hash);  // Evicts the least recently freed cached block.
  b.hashed = false;
  b.tokens.clear();
  b.ref_count = 1;
  return id;
}

void BlockManager::ReleaseBlock(int32_t id) {
  Block& b = blocks_[id];
  if (--b.ref_count > 0) return;
  if (IsCached(id)) {
    b.free_pos = free_list_.insert(free_list_.end(), id);
  } else {
    b.hashed = false;
    b.tokens.clear();
    b.free_pos = free_list_.insert(free_list_.begin(), id);
  }
  b.in_free_list = true;
}

int BlockManager::MatchPrefix(Sequence& seq) {
  if (!prefix_caching_ || !seq.block_table().empty()) return 0;
  const std::vector<int32_t>& tokens = seq.token_ids();
  // Full blocks that end before the last token: that token must be run to get logits.
  const int max_blocks = (seq.num_tokens() - 1) / block_size_;
  uint64_t prev = kFirstBlockSeed;
  for (int i = 0; i < max_blocks; ++i) {
    std::span<const int32_t> block(tokens.data() + size_t(i) * block_size_, block_size_);
    const uint64_t h = HashBlock(prev, block);
    auto it = cached_.find(h);
    if (it == cached_.end()) break;
    Block& b = blocks_[it->second];
    if (!std::equal(block.begin(), block.end(), b.tokens.begin(), b.tokens.end())) break;
    TakeFromFreeList(it->second);
    ++b.ref_count;
    seq.block_table().push_back(it->second);
    prev = h;
  }
  return static_cast<int>(seq.block_table().size()) * block_size_;
}

void BlockManager::RecordPrefixLookup(int queried, int hit) {
  prefix_queries_ += static_cast<uint64_t>(std::max(0, queried));
  prefix_hits_ += static_cast<uint64_t>(std::max(0, hit));
}

int BlockManager::BlocksNeeded(const Sequence& seq, int num_new_tokens) const {
  const int tokens = seq.num_computed_tokens() + num_new_tokens;
  const int needed = (tokens + block_size_ - 1) / block_size_;
  return std::max(0, needed - static_cast<int>(seq.block_table().size()));
}

Status BlockManager::Append(Sequence& seq, int num_new_tokens) {
  const int needed = BlocksNeeded(seq, num_new_tokens);
  if (needed > num_free_blocks()) {
    return ResourceExhaustedError("sequence " + std::to_string(seq.id()) + " needs " +
                                  std::to_string(needed) + " KV blocks, " +
                                  std::to_string(num_free_blocks()) + " free");
  }
  for (int i = 0; i < needed; ++i) seq.block_table().push_back(AllocateBlock());
  return Status::Ok();
}

bool BlockManager::CanAppendWithoutEviction(const Sequence& seq, int num_new_tokens) const {
  int needed = BlocksNeeded(seq, num_new_tokens);
  if (needed > num_free_blocks()) return false;
  for (auto it = free_list_.begin(); needed > 0; ++it, --needed) {
    if (IsCached(*it)) return false;  // plain blocks come first: the rest are cached too
  }
  return true;
}

void BlockManager::TrimTo(Sequence& seq, int num_tokens) {
  std::vector<int32_t>& table = seq.block_table();
  const size_t keep =
      static_cast<size_t>((std::max(0, num_tokens) + block_size_ - 1) / block_size_);
  while (table.size() > keep) {
    ReleaseBlock(table.back());
    table.pop_back();
  }
}

void BlockManager::CommitComputed(Sequence& seq) {
  if (!prefix_caching_) return;
  const std::vector<int32_t>& table = seq.block_table();
  const int full = std::min<int>(seq.num_computed_tokens() / block_size_, table.size());
  int first = full;
  while (first > 0 && !blocks_[table[first - 1]].hashed) --first;
  for (int i = first; i < full; ++i) {
    const uint64_t prev = i == 0 ? kFirstBlockSeed : blocks_[table[i - 1]].hash;
    std::span<const int32_t> tokens(seq.token_ids().data() + size_t(i) * block_size_, block_size_);
    Block& b = blocks_[table[i]];
    b.hash = HashBlock(prev, tokens);
    b.hashed = true;
    b.tokens.assign(tokens.begin(), tokens.end());
    cached_.emplace(b.hash, table[i]);  // An equal block cached earlier stays the entry.
  }
}

void BlockManager::Free(Sequence& seq) {
  std::vector<int32_t>& table = seq.block_table();
  for (auto it = table.rbegin(); it != table.rend(); ++it) ReleaseBlock(*it);
  table.clear();
}

}  // namespace spark::engine::runtime
