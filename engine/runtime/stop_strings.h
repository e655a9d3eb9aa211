// Stop strings: generation ends at the first occurrence of any stop string in the detokenized
// output, and the text from that occurrence on is not sent. While streaming, the tail of the
// text that could still become a stop string is held back until the next token decides it.
// The caller detokenizes; these helpers only look at text.
// Thread-safety: pure functions.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace spark::engine::runtime {

struct StopStringMatch {
  bool matched = false;
  // Bytes of the text that may be emitted: up to the stop string when matched, else all but
  // the held-back tail.
  size_t emit_len = 0;
  std::string stop;  // The stop string found.
};

// `text` is the whole output so far; the first `checked` bytes were searched by an earlier call
// (only the tail that could hold a new match is searched again). Finds the earliest match.
StopStringMatch FindStopString(std::string_view text, size_t checked,
                               std::span<const std::string> stops);

}  // namespace spark::engine::runtime
