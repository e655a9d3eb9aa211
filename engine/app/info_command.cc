// `spark-engine info`: what this build of the engine supports (backends, model types), as JSON.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "base/version.h"
#include "engine/app/engine_command.h"

namespace spark::engine {

void RegisterInfoCommand(CLI::App& parent, EngineContext& context) {
  CLI::App* cmd = parent.add_subcommand("info", "Print what this build supports, as JSON");
  cmd->footer("\nExample:\n  spark-engine info");
  cmd->callback([&context] {
    nlohmann::json info = {
        {"schema", "spark-engine-info/v1"},
        {"version", kVersion},
#ifdef SPARK_WITH_CUDA
        {"backends", {"cpu", "cuda"}},
#else
        {"backends", {"cpu"}},
#endif
    };
    std::printf("%s\n", info.dump(2).c_str());
    context.exit_code = kExitOk;
  });
}

}  // namespace spark::engine
