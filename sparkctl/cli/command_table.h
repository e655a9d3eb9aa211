// The single list of command families sparkctl offers (see command.h).
#pragma once

#include <span>

#include "sparkctl/cli/command.h"

namespace spark::cli {

std::span<const CommandEntry> CommandTable();

}  // namespace spark::cli
