#include "sparkctl/cli/app.h"

#include <limits.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/logging.h"
#include "base/version.h"
#include "sparkctl/cli/command_table.h"

namespace spark::cli {

int ReportError(const Status& status) {
  std::fprintf(stderr, "sparkctl: %s\n", status.message().c_str());
  return kExitFailed;
}

void SetExample(CLI::App* command, const std::string& example) {
  command->footer("\nExample:\n  " + example);
}

std::string SelfDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  return std::filesystem::path(std::string(buf, n)).parent_path().string();
}

std::string DefaultEngineBinary() { return SelfDir() + "/spark-engine"; }

int RunSparkctl(int argc, char** argv) {
  CLI::App app{
      "sparkctl turns a few NVIDIA DGX Spark machines into one LLM server: it finds the nodes and "
      "their cabling, configures the fabric, checks the known traps, verifies the weights and "
      "launches the tensor-parallel engine.",
      "sparkctl"};
  app.set_version_flag("--version", std::string("sparkctl ") + kVersion + " (" + kBuildType + ")");
  app.require_subcommand(1);
  app.fallthrough();
  CommandContext context;
  app.add_option("--log-level", context.globals.log_level,
                 "trace, debug, info, warn (default), error or off; also SPARK_LOG_LEVEL");
  app.footer(
      "\nStart with:\n"
      "  sparkctl profile check profiles/*.yaml     validate profiles\n"
      "  sparkctl profile show profiles/qwen3-tiny-demo.yaml --json\n"
      "Every command has --help with an example. Exit codes: 0 ok, 2 failed, 3 needs input.");
  for (const CommandFamily& family : CommandTable()) family.register_fn(app, context);

  // The config layer: the only place sparkctl reads its environment.
  app.parse_complete_callback([&] {
    if (context.globals.log_level.empty()) {
      const char* env = std::getenv("SPARK_LOG_LEVEL");
      context.globals.log_level = env ? env : "warn";
    }
    Status s = InitLogging({.level = context.globals.log_level});
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

}  // namespace spark::cli
