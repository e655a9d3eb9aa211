#include "engine/runtime/ngram_drafter.h"

#include <algorithm>

namespace spark::engine::runtime {

std::vector<int32_t> NgramDrafter::Propose(std::span<const int32_t> tokens, int max_tokens) {
  const int len = static_cast<int>(tokens.size());
  if (max_tokens < 1) return {};
  for (int n = std::min(max_n_, len - 1); n >= min_n_; --n) {
    std::span<const int32_t> suffix = tokens.subspan(len - n);
    // The most recent earlier occurrence followed by max_tokens tokens; failing that, the one
    // followed by the most (the earliest): in a loop the most recent match sits right before
    // the end and would leave a draft of one token.
    int best = -1;
    for (int start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      best = start;
      if (len - (start + n) >= max_tokens) break;
    }
    if (best < 0) continue;
    const int from = best + n;  // first token after the match (< len)
    const int count = std::min(max_tokens, len - from);
    return {tokens.begin() + from, tokens.begin() + from + count};
  }
  return {};
}

}  // namespace spark::engine::runtime
