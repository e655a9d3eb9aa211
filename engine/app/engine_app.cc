#include <csignal>
#include <cstdio>

#include "base/logging.h"
#include "base/version.h"
#include "engine/config/environment.h"
#include "engine/tokenizer/chat_format.h"
#include "engine/app/engine_command.h"

namespace spark::engine {

std::string ChatFormatHelp(const std::string& default_what) {
  std::string names;
  for (std::string_view n : tokenizer::ChatFormatNames()) {
    names += (names.empty() ? "" : ", ") + std::string(n);
  }
  return "One of " + names + " (default: " + default_what + ")";
}

int ReportEngineError(const Status& status) {
  std::fprintf(stderr, "spark-engine: %s\n", status.message().c_str());
  return kExitFailed;
}

int RunSparkEngine(int argc, char** argv) {
  // A peer rank or HTTP client that dies mid-write must surface as EPIPE on that socket (the
  // group-failure path names the rank), not kill this process with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"spark-engine: the tensor-parallel LLM engine of sparkctl (one process per GPU).",
               "spark-engine"};
  app.set_version_flag("--version", std::string("spark-engine ") + kVersion);
  app.require_subcommand(1);
  app.fallthrough();
  EngineContext context;
  app.add_option("--log-level", context.log_level,
                 "trace, debug, info, warn (default), error or off; also SPARK_LOG_LEVEL");
  for (const EngineCommand& command : EngineCommandTable()) command.register_fn(app, context);
  Result<config::Environment> env = config::ReadEnvironment();
  if (!env.ok()) return ReportEngineError(env.status());
  config::ApplyKernelSettings(*env);
  app.parse_complete_callback([&] {
    if (context.log_level.empty()) {
      context.log_level = env->log_level.value_or("warn");
      context.log_level_given = env->log_level.has_value();
    } else {
      context.log_level_given = true;
    }
    Status s = InitLogging({.level = context.log_level});
    if (!s.ok()) throw CLI::ValidationError("--log-level", s.message());
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitFailed;
  }
  return context.exit_code;
}

}  // namespace spark::engine
