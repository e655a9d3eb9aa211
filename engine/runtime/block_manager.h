// BlockManager: the paged KV cache's bookkeeping. The cache is num_blocks blocks of block_size
// token slots; a sequence's block table lists the blocks that hold its positions in order.
//
// Prefix caching: once a block is full of computed tokens it gets a hash chained from the
// previous block's hash and its own token ids, and is entered in a hash -> block map. A new
// sequence first takes the longest run of cached blocks that match its leading full blocks
// (reference counted: blocks are shared read-only). Freed blocks go on one free list: plain
// blocks at the front (reused first), cached blocks at the back in LRU order, so cached blocks
// are evicted only when nothing else is free, least recently freed first.
// Thread-safety: none; owned by the scheduler.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "engine/runtime/sequence.h"

namespace spark::engine::runtime {

struct BlockManagerOptions {
  int num_blocks = 0;
  // Tokens per KV block. Default 16.
  int block_size = 16;
  bool enable_prefix_caching = true;
};

class BlockManager {
 public:
  explicit BlockManager(const BlockManagerOptions& options);

  int block_size() const { return block_size_; }
  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  // Blocks with no user (cached or not): what allocation can draw from.
  int num_free_blocks() const { return static_cast<int>(free_list_.size()); }
  // Fraction of blocks held by sequences, in [0, 1].
  float usage() const { return 1.0f - float(num_free_blocks()) / float(num_blocks()); }
  // Blocks reachable through the prefix-cache map.
  int num_cached_blocks() const { return static_cast<int>(cached_.size()); }
  uint64_t prefix_queries() const { return prefix_queries_; }  // Tokens looked up.
  uint64_t prefix_hits() const { return prefix_hits_; }        // Tokens found.

  // For a sequence with no blocks: attaches the longest run of cached blocks that match its
  // leading full blocks, never covering its last token (whose logits must be computed), and
  // returns the number of tokens covered. 0 when prefix caching is off.
  int MatchPrefix(Sequence& seq);
  // Counts a lookup of `queried` tokens of which `hit` were cached (the scheduler calls this
  // once per admission that sticks).
  void RecordPrefixLookup(int queried, int hit);

  // Blocks to add so the table covers num_computed_tokens + num_new_tokens positions.
  int BlocksNeeded(const Sequence& seq, int num_new_tokens) const;
  bool CanAppend(const Sequence& seq, int num_new_tokens) const {
    return BlocksNeeded(seq, num_new_tokens) <= num_free_blocks();
  }
  // CanAppend, with every block drawn from plain free blocks (none evicted from the cache).
  bool CanAppendWithoutEviction(const Sequence& seq, int num_new_tokens) const;
  // Gives back the blocks past those that hold `num_tokens` positions (last first; they must be
  // unshared and unhashed: a speculative step's blocks for rejected drafts). Their free-list
  // places are where allocation took them from, so the cache is as if they were never taken.
  void TrimTo(Sequence& seq, int num_tokens);
  // Grows the table for num_new_tokens more tokens. ResourceExhausted when too few blocks.
  Status Append(Sequence& seq, int num_new_tokens);
  // After seq's num_computed_tokens advanced: hashes and caches the blocks that became full.
  void CommitComputed(Sequence& seq);
  // Releases every block of seq (last block first, so a prefix outlives its tail).
  void Free(Sequence& seq);

  // The chained hash of one full block.
  static uint64_t HashBlock(uint64_t prev_hash, std::span<const int32_t> tokens);

 private:
  struct Block {
    int ref_count = 0;
    bool hashed = false;
    uint64_t hash = 0;
    std::vector<int32_t> tokens;  // Kept to rule out hash collisions.
    std::list<int32_t>::iterator free_pos;
    bool in_free_list = false;
  };

  int32_t AllocateBlock();
  void TakeFromFreeList(int32_t id);
  void ReleaseBlock(int32_t id);
  bool IsCached(int32_t id) const;

  const int block_size_;
  const bool prefix_caching_;
  std::vector<Block> blocks_;
  std::list<int32_t> free_list_;
  std::unordered_map<uint64_t, int32_t> cached_;
  uint64_t prefix_queries_ = 0;
  uint64_t prefix_hits_ = 0;
};

}  // namespace spark::engine::runtime
