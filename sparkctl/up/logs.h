// `sparkctl logs`: the engine's log of every rank, read from each node over SSH and interleaved
// by the time at the start of each line ("[2026-11-29 22:10:00.123] ..." as spdlog writes it; a
// line without a time keeps the time of the line before), each prefixed with its rank.
// `--follow` polls every node for what was appended since the last read (by byte offset).
// Thread-safety: functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sparkctl/ssh/transport.h"
#include "sparkctl/up/launch_plan.h"

namespace spark::up {

struct LogLine {
  int rank = 0;
  double time = 0;  // seconds since the epoch (local time of the node, as written); 0 unknown
  std::string text;
};

// The time at the start of a log line ("[YYYY-MM-DD HH:MM:SS(.mmm)]"), nullopt when none.
std::optional<double> ParseLogTime(std::string_view line);

// `--since`: "90s", "10m", "2h", "1d" before `now`, or "YYYY-MM-DD HH:MM:SS" / "...THH:MM:SS"
// (local time). InvalidArgument naming the flag and the accepted forms.
Result<double> ParseSince(std::string_view text, double now);

// Splits each rank's text into lines and merges them by time (stable: equal times keep rank
// order, lines of one rank keep their order). Lines before `since` are dropped.
std::vector<LogLine> Interleave(const std::map<int, std::string>& text_by_rank, double since = 0);

// "r1 | [2026-...] text".
std::string FormatLogLine(const LogLine& line);

struct LogCursor {
  std::map<int, int64_t> offsets;  // rank -> bytes already read
};

// Reads what each selected rank's log has beyond `cursor` (all of it the first time, or the last
// `tail_lines` lines when > 0) and advances the cursor. `rank` < 0: every rank. Errors: the
// Transport's, naming the node; a missing log file reads as empty.
Result<std::map<int, std::string>> ReadLogs(ssh::Transport& transport, const LaunchPlan& plan,
                                            int rank, LogCursor* cursor, int tail_lines = 0);

}  // namespace spark::up
