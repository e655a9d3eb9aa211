#include "sparkctl/cli/command_table.h"

#include "sparkctl/cli/families.h"

namespace spark::cli {

std::span<const CommandEntry> CommandTable() {
  // One row per command family, in the order --help lists them.
  static constexpr CommandEntry kTable[] = {
      {"profile", RegisterProfileCommands},
      {"plan", RegisterPlanCommands},
      {"cluster", RegisterClusterCommands},
      {"discover", RegisterDiscoverCommands},
      {"preflight", RegisterPreflightCommands},
      {"host", RegisterHostCommands},
      {"net", RegisterNetCommands},
      {"selftest", RegisterSelftestCommands},
      {"bench", RegisterBenchCommands},
      {"weights", RegisterWeightsCommands},
      {"up", RegisterUpCommands},
      {"dashboard", RegisterDashboardCommands},
      {"check", RegisterCheckCommands},
      {"tls", RegisterTlsCommands},
      {"bundle", RegisterBundleCommands},
      {"sim", RegisterSimCommands},
      {"node", RegisterNodeCommands},
  };
  return kTable;
}

}  // namespace spark::cli
