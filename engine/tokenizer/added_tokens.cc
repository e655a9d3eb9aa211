#include "engine/tokenizer/added_tokens.h"

#include <algorithm>

namespace spark::tokenizer {

AddedTokenMatcher::AddedTokenMatcher(const std::vector<std::pair<std::string, int32_t>>& tokens) {
  root_next_.fill(-1);
  for (const auto& [content, id] : tokens) {
    if (!content.empty()) Insert(content, id);
  }
  for (const auto& [byte, child] : nodes_[0].children) root_next_[byte] = child;
}

int32_t AddedTokenMatcher::Child(int32_t node, uint8_t byte) const {
  if (node == 0) return root_next_[byte];
  const auto& children = nodes_[node].children;
  auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, INT32_MIN));
  return it != children.end() && it->first == byte ? it->second : -1;
}

void AddedTokenMatcher::Insert(std::string_view content, int32_t id) {
  int32_t node = 0;
  for (char c : content) {
    const auto byte = static_cast<uint8_t>(c);
    auto& children = nodes_[node].children;
    auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, INT32_MIN));
    if (it != children.end() && it->first == byte) {
      node = it->second;
      continue;
    }
    const auto next = static_cast<int32_t>(nodes_.size());
    children.insert(it, {byte, next});
    nodes_.emplace_back();  // may reallocate: `children` is not used after this
    node = next;
  }
  if (nodes_[node].token_id < 0) nodes_[node].token_id = id;
}

std::vector<AddedTokenMatcher::Match> AddedTokenMatcher::FindAll(std::string_view text) const {
  std::vector<Match> matches;
  if (empty()) return matches;
  for (size_t pos = 0; pos < text.size();) {
    size_t best_len = 0;
    int32_t best_id = -1;
    int32_t node = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      node = Child(node, static_cast<uint8_t>(text[i]));
      if (node < 0) break;
      if (nodes_[node].token_id >= 0) {
        best_len = i - pos + 1;
        best_id = nodes_[node].token_id;
      }
    }
    if (best_id < 0) {
      ++pos;
      continue;
    }
    matches.push_back({pos, best_len, best_id});
    pos += best_len;
  }
  return matches;
}

}  // namespace spark::tokenizer
