// Printing preflight results as a table (one row per node and check) for humans.
#pragma once

#include <vector>

#include "sparkctl/host/checks.h"

namespace spark::cli {

void PrintCheckTable(const std::vector<host::CheckResult>& results);

}  // namespace spark::cli
