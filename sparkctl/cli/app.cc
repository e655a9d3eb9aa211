#include "sparkctl/cli/app.h"

#include <limits.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "base/version.h"
#include "sparkctl/bundle/deploy.h"
#include "sparkctl/cli/command.h"
#include "sparkctl/cli/command_table.h"
#include "sparkctl/weights/hub_fetch.h"

namespace spark::cli {

int ReportError(const Status& status, const std::string& json_schema) {
  if (!json_schema.empty()) {
    const nlohmann::ordered_json out = {
        {"schema", json_schema},
        {"ok", false},
        {"error",
         {{"code", std::string(StatusCodeName(status.code()))}, {"message", status.message()}}}};
    std::printf("%s\n", out.dump(2).c_str());
    std::fflush(stdout);
  }
  return ReportCommandError("sparkctl", status);
}

std::string SelfDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  return std::filesystem::path(std::string(buf, n)).parent_path().string();
}

std::string DefaultEngineBinary() { return SelfDir() + "/spark-engine"; }

std::map<std::string, std::string> HubEnvironment() {
  std::map<std::string, std::string> env;
  for (const char* name : weights::kHubVariables) {
    if (const char* value = std::getenv(name); value && *value) env[name] = value;
  }
  return env;
}

int RunSparkctl(int argc, char** argv) {
  CommandLine line;
  line.program = "sparkctl";
  line.description =
      "sparkctl turns a few NVIDIA DGX Spark machines into one LLM server: it finds the nodes "
      "and their cabling, configures the fabric, checks the known traps, verifies the weights "
      "and launches the tensor-parallel engine.";
  line.version = std::string("sparkctl ") + kVersion + " (" + kBuildType + ")";
  line.footer =
      "\nStart with:\n"
      "  sparkctl profile check profiles/*.yaml     validate profiles\n"
      "  sparkctl profile show profiles/qwen3-tiny-demo.yaml --json\n"
      "Every command has --help with an example. Exit codes: 0 ok, 2 failed, 3 needs input.";
  // The configuration layer: the only place sparkctl reads its environment.
  if (const char* env = std::getenv("SPARK_LOG_LEVEL")) line.env_log_level = env;
  // The programs nodes get: this build's bundle, and those named in SPARKCTL_BUNDLES (folders
  // separated by ':') for nodes of other machines (docs/bundles.md).
  bundle::CatalogOptions catalog{.self_dir = SelfDir(), .version = kVersion};
  if (const char* env = std::getenv("SPARKCTL_BUNDLES")) {
    catalog.bundle_dirs = Split(env, ':', /*skip_empty=*/true);
  }
  bundle::ConfigureDefaultCatalog(std::move(catalog));
  return RunCommandLine(line, CommandTable(), argc, argv);
}

}  // namespace spark::cli
