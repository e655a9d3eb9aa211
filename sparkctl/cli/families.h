// Registration functions of the command families, one per file in this folder.
#pragma once

#include "sparkctl/cli/command.h"

namespace spark::cli {

void RegisterProfileCommands(CLI::App& parent, CommandContext& context);  // profile_commands.cc
void RegisterClusterCommands(CLI::App& parent, CommandContext& context);  // cluster_commands.cc

}  // namespace spark::cli
