// Finds added tokens (special tokens such as "<|im_end|>" and other added vocabulary) in text:
// leftmost-longest, non-overlapping matches, as Hugging Face tokenizers' added vocabulary does.
// Thread-safety: immutable after construction.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spark::tokenizer {

class AddedTokenMatcher {
 public:
  struct Match {
    size_t pos;
    size_t len;
    int32_t id;
  };

  AddedTokenMatcher() { root_next_.fill(-1); }
  // tokens: (content, id). Empty contents are ignored.
  explicit AddedTokenMatcher(const std::vector<std::pair<std::string, int32_t>>& tokens);

  bool empty() const { return nodes_.size() <= 1; }

  // All matches in `text`, in order.
  std::vector<Match> FindAll(std::string_view text) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t token_id = -1;
  };
  int32_t Child(int32_t node, uint8_t byte) const;
  void Insert(std::string_view content, int32_t id);

  std::vector<Node> nodes_{Node{}};
  std::array<int32_t, 256> root_next_;  // fast first-byte rejection
};

}  // namespace spark::tokenizer
