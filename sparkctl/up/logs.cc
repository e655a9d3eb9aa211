// Reading and interleaving the engine logs of every rank.
#include "sparkctl/up/logs.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "base/strings.h"
#include "sparkctl/ssh/parallel.h"

namespace spark::up {

std::optional<double> ParseLogTime(std::string_view line) {
  if (line.size() < 21 || line[0] != '[') return std::nullopt;
  std::string s(line.substr(1, 19));
  struct tm tm = {};
  const char* rest = strptime(s.c_str(), "%Y-%m-%d %H:%M:%S", &tm);
  if (!rest || *rest != '\0') return std::nullopt;
  tm.tm_isdst = -1;
  double t = static_cast<double>(mktime(&tm));
  if (line.size() > 21 && line[20] == '.') t += std::strtod(std::string(line.substr(20, 4)).c_str(), nullptr);
  return t;
}

Result<double> ParseSince(std::string_view text, double now) {
  const std::string s(Trim(text));
  if (!s.empty() && std::isdigit(static_cast<unsigned char>(s[0]))) {
    char* end = nullptr;
    const double n = std::strtod(s.c_str(), &end);
    const std::string unit(end);
    const double mult = unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : unit == "d" ? 86400 : 0;
    if (mult > 0) return now - n * mult;
    std::string iso = s;
    std::replace(iso.begin(), iso.end(), 'T', ' ');
    struct tm tm = {};
    const char* rest = strptime(iso.c_str(), "%Y-%m-%d %H:%M:%S", &tm);
    if (rest && *rest == '\0') {
      tm.tm_isdst = -1;
      return static_cast<double>(mktime(&tm));
    }
  }
  return InvalidArgumentError("--since " + s +
                              ": use a duration (90s, 10m, 2h, 1d) or a local time "
                              "(\"2026-11-29 22:10:00\")");
}

std::vector<LogLine> Interleave(const std::map<int, std::string>& text_by_rank, double since) {
  std::vector<LogLine> lines;
  for (const auto& [rank, text] : text_by_rank) {
    double last = 0;
    for (const std::string& l : Split(text, '\n', true)) {
      if (auto t = ParseLogTime(l)) last = *t;
      if (since > 0 && last < since) continue;
      lines.push_back({rank, last, l});
    }
  }
  std::stable_sort(lines.begin(), lines.end(),
                   [](const LogLine& a, const LogLine& b) { return a.time < b.time; });
  return lines;
}

std::string FormatLogLine(const LogLine& line) {
  return "r" + std::to_string(line.rank) + " | " + line.text;
}

Result<std::map<int, std::string>> ReadLogs(ssh::Transport& transport, const LaunchPlan& plan,
                                            int rank, LogCursor* cursor, int tail_lines) {
  std::vector<const RankLaunch*> ranks;
  for (const auto& r : plan.ranks) {
    if (rank < 0 || r.rank == rank) ranks.push_back(&r);
  }
  if (ranks.empty()) {
    return InvalidArgumentError("--rank " + std::to_string(rank) + ": the model has ranks 0.." +
                                std::to_string(plan.ranks.size() - 1));
  }
  std::vector<Result<std::pair<int64_t, std::string>>> results(ranks.size(),
                                                               InternalError("not run"));
  ssh::ParallelFor(ranks.size(), ssh::kDefaultMaxParallel, [&](size_t i) {
    const RankLaunch& r = *ranks[i];
    const int64_t off = cursor->offsets.count(r.rank) ? cursor->offsets[r.rank] : 0;
    const std::string f = ssh::ShellQuote(r.log_path);
    // First line: the file's size now; then the bytes from the offset up to that size.
    std::string cmd = "s=$(stat -c %s " + f + " 2>/dev/null || echo 0); echo $s; ";
    if (off == 0 && tail_lines > 0) {
      cmd += "tail -n " + std::to_string(tail_lines) + " " + f + " 2>/dev/null | head -c $s";
    } else {
      cmd += "[ $s -gt " + std::to_string(off) + " ] && tail -c +" + std::to_string(off + 1) +
             " " + f + " | head -c $((s-" + std::to_string(off) + ")); true";
    }
    auto run = ssh::RunChecked(transport, r.node, cmd);
    if (!run.ok()) {
      results[i] = run.status();
      return;
    }
    const std::string& out = run->stdout_data;
    const size_t nl = out.find('\n');
    const int64_t size = std::atoll(out.substr(0, nl).c_str());
    // A log that shrank was rotated or truncated: read it again from the start next time.
    results[i] = std::make_pair(size < off ? 0 : size,
                                nl == std::string::npos ? std::string() : out.substr(nl + 1));
  });
  std::map<int, std::string> text;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (!results[i].ok()) return results[i].status();
    cursor->offsets[ranks[i]->rank] = results[i]->first;
    text[ranks[i]->rank] = results[i]->second;
  }
  return text;
}

}  // namespace spark::up
