#include "sparkctl/dashboard/prometheus_text.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "base/strings.h"

namespace spark::dashboard {
namespace {

// Parses `{a="x",b="y"}` starting at text[*pos] == '{'; leaves *pos after '}'. False when
// malformed.
bool ParseLabels(std::string_view text, size_t* pos, std::map<std::string, std::string>* out) {
  size_t i = *pos + 1;
  while (i < text.size() && text[i] != '}') {
    const size_t eq = text.find('=', i);
    if (eq == std::string_view::npos || eq + 1 >= text.size() || text[eq + 1] != '"') return false;
    std::string key(Trim(text.substr(i, eq - i)));
    std::string value;
    size_t j = eq + 2;
    for (; j < text.size() && text[j] != '"'; ++j) {
      if (text[j] == '\\' && j + 1 < text.size()) {
        ++j;
        value += text[j] == 'n' ? '\n' : text[j];
      } else {
        value += text[j];
      }
    }
    if (j >= text.size()) return false;
    (*out)[key] = value;
    i = j + 1;
    if (i < text.size() && text[i] == ',') ++i;
  }
  if (i >= text.size()) return false;
  *pos = i + 1;
  return true;
}

double ParseValue(std::string_view v) {
  if (v == "+Inf") return std::numeric_limits<double>::infinity();
  if (v == "-Inf") return -std::numeric_limits<double>::infinity();
  return std::strtod(std::string(v).c_str(), nullptr);
}

}  // namespace

std::vector<Sample> ParsePrometheus(std::string_view body) {
  std::vector<Sample> out;
  for (const std::string& raw : Split(body, '\n', true)) {
    std::string_view line = Trim(raw);
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    size_t pos = line.find_first_of("{ ");
    if (pos == std::string_view::npos) continue;
    s.name = std::string(line.substr(0, pos));
    if (line[pos] == '{' && !ParseLabels(line, &pos, &s.labels)) continue;
    std::string_view rest = Trim(line.substr(pos));
    if (rest.empty()) continue;
    s.value = ParseValue(rest.substr(0, rest.find(' ')));  // a timestamp may follow
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<double> MetricsBody::Sum(std::string_view name) const {
  std::optional<double> sum;
  for (const Sample& s : samples_) {
    if (s.name == name) sum = sum.value_or(0) + s.value;
  }
  return sum;
}

std::map<double, double> MetricsBody::Buckets(std::string_view name) const {
  std::map<double, double> buckets;
  const std::string bucket = std::string(name) + "_bucket";
  for (const Sample& s : samples_) {
    if (s.name != bucket) continue;
    auto le = s.labels.find("le");
    if (le == s.labels.end()) continue;
    buckets[ParseValue(le->second)] += s.value;
  }
  return buckets;
}

std::optional<double> QuantileOfChange(const MetricsBody& before, const MetricsBody& after,
                                       std::string_view name, double q) {
  std::map<double, double> b = after.Buckets(name);
  const std::map<double, double> a = before.Buckets(name);
  for (auto& [le, count] : b) {
    auto it = a.find(le);
    if (it != a.end()) count = std::max(0.0, count - it->second);
  }
  if (b.empty()) return std::nullopt;
  const double total = b.rbegin()->second;  // +Inf
  if (total <= 0) return std::nullopt;
  const double rank = q * total;
  double lower = 0, below = 0;
  for (const auto& [le, count] : b) {
    if (count >= rank) {
      if (std::isinf(le)) return lower;  // the highest finite bound, as Prometheus answers
      if (count == below) return le;
      return lower + (le - lower) * (rank - below) / (count - below);
    }
    lower = le;
    below = count;
  }
  return lower;
}

}  // namespace spark::dashboard
