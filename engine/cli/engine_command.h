// The command table of spark-engine: one explicit list of subcommands (engine_command_table.cc),
// each registering itself on the CLI11 app through base/command_line.h's bootstrap, shared with
// sparkctl. Results go to stdout; logs to stderr. Exit codes: 0 ok, 2 failed.
#pragma once

#include <span>
#include <string>

#include "base/command_line.h"
#include "base/status.h"

namespace spark::engine {

std::span<const CommandEntry> EngineCommandTable();

// "One of deepseek_v3, deepseek_v4, qwen3 (default: <default_what>)": the --chat-format help
// from the tokenizer's table of formats.
std::string ChatFormatHelp(const std::string& default_what);

// Prints "spark-engine: <message>" to stderr; returns kExitFailed.
int ReportEngineError(const Status& status);

int RunSparkEngine(int argc, char** argv);

}  // namespace spark::engine
