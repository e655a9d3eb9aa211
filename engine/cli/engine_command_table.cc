#include "engine/cli/engine_command.h"

namespace spark::engine {

void RegisterInfoCommand(CLI::App& parent, CommandContext& context);
void RegisterTokenizeCommand(CLI::App& parent, CommandContext& context);
void RegisterDetokenizeCommand(CLI::App& parent, CommandContext& context);
void RegisterRenderChatCommand(CLI::App& parent, CommandContext& context);
void RegisterGenerateCommand(CLI::App& parent, CommandContext& context);
void RegisterServeCommand(CLI::App& parent, CommandContext& context);
void RegisterPlanCommand(CLI::App& parent, CommandContext& context);
void RegisterPerplexityCommand(CLI::App& parent, CommandContext& context);

std::span<const CommandEntry> EngineCommandTable() {
  // One row per subcommand, in the order --help lists them.
  static constexpr CommandEntry kTable[] = {
      {"info", RegisterInfoCommand},
      {"tokenize", RegisterTokenizeCommand},
      {"detokenize", RegisterDetokenizeCommand},
      {"render-chat", RegisterRenderChatCommand},
      {"generate", RegisterGenerateCommand},
      {"serve", RegisterServeCommand},
      {"perplexity", RegisterPerplexityCommand},
      {"plan", RegisterPlanCommand},
  };
  return kTable;
}

}  // namespace spark::engine
