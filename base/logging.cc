#include "base/logging.h"

#include <unistd.h>

#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace spark {
namespace {

struct LogState {
  std::mutex mu;
  spdlog::level::level_enum level = spdlog::level::warn;
  std::string pattern = "[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] [%n] %v";
  spdlog::sink_ptr sink;
};

LogState& State() {
  static LogState* state = [] {
    auto* s = new LogState();
    s->sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    return s;
  }();
  return *state;
}

std::string LocalHostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "?";
  return buf;
}

}  // namespace

Result<spdlog::level::level_enum> ParseLogLevel(std::string_view name) {
  static constexpr std::pair<std::string_view, spdlog::level::level_enum> kLevels[] = {
      {"trace", spdlog::level::trace}, {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},   {"warn", spdlog::level::warn},
      {"warning", spdlog::level::warn}, {"error", spdlog::level::err},
      {"critical", spdlog::level::critical}, {"off", spdlog::level::off},
  };
  for (const auto& [n, level] : kLevels) {
    if (n == name) return level;
  }
  return InvalidArgumentError("unknown log level '" + std::string(name) +
                              "' (use trace, debug, info, warn, error, critical or off)");
}

Status InitLogging(const LogOptions& options) {
  SPARK_ASSIGN_OR_RETURN(auto level, ParseLogLevel(options.level));
  std::string where = options.host.empty() ? LocalHostname() : options.host;
  if (options.rank) where += " r" + std::to_string(*options.rank);
  LogState& state = State();
  std::lock_guard<std::mutex> lock(state.mu);
  state.level = level;
  state.pattern = "[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] [" + where + "] [%n] %v";
  spdlog::apply_all([&](std::shared_ptr<spdlog::logger> l) {
    l->set_level(level);
    l->set_pattern(state.pattern);
  });
  return Status::Ok();
}

std::shared_ptr<spdlog::logger> Logger(const std::string& name) {
  LogState& state = State();
  std::lock_guard<std::mutex> lock(state.mu);
  if (auto existing = spdlog::get(name)) return existing;
  auto logger = std::make_shared<spdlog::logger>(name, state.sink);
  logger->set_level(state.level);
  logger->set_pattern(state.pattern);
  spdlog::register_logger(logger);
  return logger;
}

}  // namespace spark
