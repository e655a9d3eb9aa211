// What the one-shot latency benchmarks share: sizes from the command line ("4K,10K,64K") and
// percentiles of per-call times.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace spark::bench {

// "4096", "4K" / "4k", "1M" / "1m" -> bytes.
inline size_t Bytes(const std::string& text) {
  const char unit = text.empty() ? ' ' : text.back();
  const size_t n = std::stoul(text);
  return unit == 'K' || unit == 'k' ? n << 10 : unit == 'M' || unit == 'm' ? n << 20 : n;
}

// "4K,10K,64K" -> bytes each.
inline std::vector<size_t> ParseSizes(const std::string& text) {
  std::vector<size_t> sizes;
  for (size_t start = 0; start <= text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    sizes.push_back(Bytes(text.substr(start, comma - start)));
    start = comma + 1;
  }
  return sizes;
}

inline double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

}  // namespace spark::bench
