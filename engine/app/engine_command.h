// The command table of spark-engine: one explicit list of subcommands (engine_command_table.cc),
// each registering itself on the CLI11 app. Results go to stdout; logs to stderr.
// Exit codes: 0 ok, 2 failed.
#pragma once

#include <span>
#include <string>

#include <CLI/CLI.hpp>

#include "base/status.h"

namespace spark::engine {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 2;

struct EngineContext {
  std::string log_level;
  // True when --log-level or SPARK_LOG_LEVEL chose the level (commands may pick their own
  // default otherwise: serve logs at info).
  bool log_level_given = false;
  int exit_code = kExitOk;
};

using EngineRegisterFn = void (*)(CLI::App& parent, EngineContext& context);

struct EngineCommand {
  const char* name;
  EngineRegisterFn register_fn;
};

std::span<const EngineCommand> EngineCommandTable();

// "One of deepseek_v3, deepseek_v4, qwen3 (default: <default_what>)": the --chat-format help
// from the tokenizer's table of formats.
std::string ChatFormatHelp(const std::string& default_what);

// Prints "spark-engine: <message>" to stderr; returns kExitFailed.
int ReportEngineError(const Status& status);

int RunSparkEngine(int argc, char** argv);

}  // namespace spark::engine
