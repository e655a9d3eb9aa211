// The command-line bootstrap that spark-engine and sparkctl share: one explicit table of
// commands (ninja's kTools[] style: each row registers its subcommands on the CLI11 app, no
// static registration), --version and --log-level (its default from the environment, as the
// caller's configuration layer read it), parsing with CLI11's messages on stderr, and the flags
// every command spells the same way.
//
// Conventions (docs/cli.md): results go to stdout (a table, or JSON with --json and a versioned
// "schema" field); logs and progress go to stderr; exit codes 0 ok, 2 failed, 3 needs input;
// every command's --help ends with an example.
// Thread-safety: call from main.
#pragma once

#include <optional>
#include <span>
#include <string>

#include <CLI/CLI.hpp>

#include "base/status.h"

namespace spark {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 2;
inline constexpr int kExitNeedsInput = 3;

// What the running command sees and reports back.
struct CommandContext {
  std::string log_level;         // --log-level, else the environment's, else "warn"
  bool log_level_given = false;  // by the flag or the environment (commands may pick their own)
  int exit_code = kExitOk;
};

using RegisterCommandFn = void (*)(CLI::App& parent, CommandContext& context);

struct CommandEntry {
  const char* name;  // for docs and tests
  RegisterCommandFn register_fn;
};

struct CommandLine {
  std::string program;      // "sparkctl"
  std::string description;  // the first line of --help
  std::string version;      // what --version prints
  std::string footer;       // the end of the top-level --help
  std::optional<std::string> env_log_level;  // SPARK_LOG_LEVEL, read by the configuration layer
};

// Builds the app from `table`, parses argv, sets up logging and runs the chosen command; returns
// the process exit code (the command's, or kExitFailed for a parse error).
int RunCommandLine(const CommandLine& line, std::span<const CommandEntry> table, int argc,
                   char** argv);

// After a failed parse: "sparkctl profile: unknown command 'chek' (did you mean 'check'?) ..."
// or "sparkctl up: unknown flag '--nope' ..." for the first word no command took; "" when every
// word was taken (the parse error itself is then the news).
std::string UnknownWordMessage(const CLI::App& app);

// Prints "<program>: <message>" to stderr and returns kExitFailed.
int ReportCommandError(const std::string& program, const Status& status);

// The flags spelled alike in every command.
// -c/--cluster FILE: the cluster inventory (default ./cluster.yaml).
CLI::Option* AddClusterFlag(CLI::App* cmd, std::string* file,
                            const std::string& help = "Cluster inventory (default ./cluster.yaml)");
// --json: machine-readable output of schema `schema` on stdout.
CLI::Option* AddJsonFlag(CLI::App* cmd, bool* json, const std::string& schema = "");
// --yes: do not ask before changing nodes.
CLI::Option* AddYesFlag(CLI::App* cmd, bool* yes,
                        const std::string& help = "Do not ask before changing nodes");
// The "Example:" footer of every command's --help.
void SetExample(CLI::App* cmd, const std::string& example);

}  // namespace spark
