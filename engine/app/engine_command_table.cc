#include "engine/app/engine_command.h"

namespace spark::engine {

void RegisterInfoCommand(CLI::App& parent, EngineContext& context);
void RegisterTokenizeCommand(CLI::App& parent, EngineContext& context);
void RegisterDetokenizeCommand(CLI::App& parent, EngineContext& context);
void RegisterRenderChatCommand(CLI::App& parent, EngineContext& context);
void RegisterGenerateCommand(CLI::App& parent, EngineContext& context);
void RegisterServeCommand(CLI::App& parent, EngineContext& context);

std::span<const EngineCommand> EngineCommandTable() {
  // One row per subcommand, in the order --help lists them.
  static constexpr EngineCommand kTable[] = {
      {"info", RegisterInfoCommand},
      {"tokenize", RegisterTokenizeCommand},
      {"detokenize", RegisterDetokenizeCommand},
      {"render-chat", RegisterRenderChatCommand},
      {"generate", RegisterGenerateCommand},
      {"serve", RegisterServeCommand},
  };
  return kTable;
}

}  // namespace spark::engine
