#include "engine/app/engine_command.h"

namespace spark::engine {

void RegisterInfoCommand(CLI::App& parent, EngineContext& context);

std::span<const EngineCommand> EngineCommandTable() {
  // One row per subcommand, in the order --help lists them.
  static constexpr EngineCommand kTable[] = {
      {"info", RegisterInfoCommand},
  };
  return kTable;
}

}  // namespace spark::engine
