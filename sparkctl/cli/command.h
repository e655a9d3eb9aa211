// The command table of sparkctl: one explicit list of command families (command_table.cc), each
// registering its subcommands on the CLI11 app. Only commands that work are registered.
//
// Conventions every command follows (docs/cli.md):
//   - results go to stdout (a table, or JSON with --json and a versioned "schema" field);
//     logs and progress go to stderr;
//   - exit codes: 0 ok, 2 failed, 3 needs user input (kExit*);
//   - cluster commands take -c/--cluster FILE (default ./cluster.yaml), model commands
//     -p/--profile FILE; commands that change nodes show the plan and ask unless --yes;
//   - every command's --help ends with an example.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "base/status.h"

namespace spark::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 2;
inline constexpr int kExitNeedsInput = 3;

// Options shared by every command, parsed before the subcommand runs.
struct GlobalOptions {
  std::string log_level;  // --log-level, else SPARK_LOG_LEVEL, else "warn"
};

// What a running command reports back to main().
struct CommandContext {
  GlobalOptions globals;
  int exit_code = kExitOk;
};

using RegisterFn = void (*)(CLI::App& parent, CommandContext& context);

struct CommandFamily {
  const char* name;     // for docs and tests
  RegisterFn register_fn;
};

// Prints a failed Status to stderr as "sparkctl: <message>" and returns kExitFailed.
int ReportError(const Status& status);

// Adds the "Example:" footer that every command's --help shows.
void SetExample(CLI::App* command, const std::string& example);

// The folder this sparkctl binary is in, and the spark-engine beside it (what `up` installs and
// what profile checks ask; --engine overrides both).
std::string SelfDir();
std::string DefaultEngineBinary();

}  // namespace spark::cli
