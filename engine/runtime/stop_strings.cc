#include "engine/runtime/stop_strings.h"

#include <algorithm>

namespace spark::engine::runtime {

namespace {

// Length of the longest suffix of `text` that is a proper prefix of some stop string.
size_t HoldBack(std::string_view text, std::span<const std::string> stops) {
  size_t hold = 0;
  for (const std::string& stop : stops) {
    const size_t max = std::min(text.size(), stop.size() - 1);
    for (size_t len = max; len > hold; --len) {
      if (text.substr(text.size() - len) == std::string_view(stop).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  return hold;
}

}  // namespace

StopStringMatch FindStopString(std::string_view text, size_t checked,
                               std::span<const std::string> stops) {
  StopStringMatch result;
  size_t earliest = std::string_view::npos;
  for (const std::string& stop : stops) {
    if (stop.empty()) continue;
    // A match not seen before must end after `checked`.
    const size_t from = checked >= stop.size() ? checked - stop.size() + 1 : 0;
    const size_t at = text.find(stop, std::min(from, text.size()));
    if (at < earliest) {
      earliest = at;
      result.stop = stop;
    }
  }
  if (earliest != std::string_view::npos) {
    result.matched = true;
    result.emit_len = earliest;
    return result;
  }
  result.emit_len = text.size() - HoldBack(text, stops);
  return result;
}

}  // namespace spark::engine::runtime
