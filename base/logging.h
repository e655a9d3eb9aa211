// Logging on spdlog: one named logger per library, all writing to stderr.
//
// Libraries call spark::Logger("ssh")->info(...); they never print to stdout, which belongs to
// command results (--json). The process calls InitLogging once, early, with the level from
// --log-level or the SPARK_LOG_LEVEL environment variable (read by the CLI's config layer), and
// the host and rank that every line carries.
// Thread-safety: Logger() and the returned loggers are safe to use from any thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "base/status.h"

namespace spark {

struct LogOptions {
  // trace, debug, info, warn, error, critical, off. Default: warn, so commands print only
  // results and real problems unless asked.
  std::string level = "warn";
  // Shown on every line; defaults to the machine's hostname.
  std::string host;
  // Engine rank, shown as "r<rank>" when set.
  std::optional<int> rank;
};

// Parses a level name. Returns InvalidArgument naming the accepted levels.
Result<spdlog::level::level_enum> ParseLogLevel(std::string_view name);

// Configures every existing and future logger. Returns InvalidArgument for a bad level.
Status InitLogging(const LogOptions& options);

// The logger for a library ("ssh", "sim", "engine.runtime", ...), created on first use.
std::shared_ptr<spdlog::logger> Logger(const std::string& name);

}  // namespace spark
