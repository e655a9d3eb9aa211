#include <csignal>

#include "base/version.h"
#include "engine/cli/engine_command.h"
#include "engine/config/environment.h"
#include "engine/tokenizer/chat_format.h"

namespace spark::engine {

std::string ChatFormatHelp(const std::string& default_what) {
  std::string names;
  for (std::string_view n : tokenizer::ChatFormatNames()) {
    names += (names.empty() ? "" : ", ") + std::string(n);
  }
  return "One of " + names + " (default: " + default_what + ")";
}

int ReportEngineError(const Status& status) {
  return ReportCommandError("spark-engine", status);
}

int RunSparkEngine(int argc, char** argv) {
  // A peer rank or HTTP client that dies mid-write must surface as EPIPE on that socket (the
  // group-failure path names the rank), not kill this process with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  Result<config::Environment> env = config::ReadEnvironment();
  if (!env.ok()) return ReportEngineError(env.status());
  config::ApplyKernelSettings(*env);
  CommandLine line;
  line.program = "spark-engine";
  line.description =
      "spark-engine: the tensor-parallel LLM engine of sparkctl (one process per GPU).";
  line.version = std::string("spark-engine ") + kVersion;
  line.env_log_level = env->log_level;
  return RunCommandLine(line, EngineCommandTable(), argc, argv);
}

}  // namespace spark::engine
