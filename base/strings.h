// Small string helpers shared by every library: splitting, trimming, did-you-mean suggestions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spark {

std::vector<std::string> Split(std::string_view text, char sep, bool skip_empty = false);
std::string_view Trim(std::string_view text);
std::string Join(const std::vector<std::string>& parts, std::string_view sep);
bool StartsWith(std::string_view text, std::string_view prefix);
bool EndsWith(std::string_view text, std::string_view suffix);

// At most `max_bytes` of UTF-8 `text`, cut before a character rather than inside one (a cut
// character is not valid UTF-8, and JSON writers refuse it).
std::string_view Utf8Prefix(std::string_view text, size_t max_bytes);

// Edit distance between a and b, counting an adjacent transposition as one edit.
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate closest to `word` when it is close enough to be a likely typo
// (a known name that starts with `word`, or distance <= max(1, word.size() / 3)); nullopt
// otherwise.
std::optional<std::string> ClosestMatch(std::string_view word,
                                        const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "" when nothing is close.
std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates);

// "1.5 GiB", "312 MiB", "17 B".
std::string HumanBytes(uint64_t bytes);

// A number as people write it: the shortest text that reads back as `value` ("0.82", "-1",
// "1048576"), never "-1.000000".
std::string FormatNumber(double value);

// Parses a decimal integer that must fill the whole string.
std::optional<int64_t> ParseInt(std::string_view text);

}  // namespace spark
