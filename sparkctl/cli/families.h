// Registration functions of the command families, one per file in this folder.
#pragma once

#include "sparkctl/cli/command.h"

namespace spark::cli {

void RegisterProfileCommands(CLI::App& parent, CommandContext& context);  // profile_commands.cc
void RegisterClusterCommands(CLI::App& parent, CommandContext& context);  // cluster_commands.cc
void RegisterDiscoverCommands(CLI::App& parent, CommandContext& context);  // discover_commands.cc
void RegisterPreflightCommands(CLI::App& parent, CommandContext& context);  // preflight_commands.cc
void RegisterHostCommands(CLI::App& parent, CommandContext& context);  // host_commands.cc
void RegisterNodeCommands(CLI::App& parent, CommandContext& context);  // node_commands.cc
void RegisterWeightsCommands(CLI::App& parent, CommandContext& context);  // weights_commands.cc
void RegisterSimCommands(CLI::App& parent, CommandContext& context);      // sim_commands.cc
void RegisterNetCommands(CLI::App& parent, CommandContext& context);      // net_commands.cc
void RegisterBenchCommands(CLI::App& parent, CommandContext& context);    // bench_commands.cc
void RegisterSelftestCommands(CLI::App& parent, CommandContext& context);  // selftest_commands.cc
void RegisterUpCommands(CLI::App& parent, CommandContext& context);       // up_commands.cc
void RegisterPlanCommands(CLI::App& parent, CommandContext& context);     // plan_commands.cc
void RegisterCheckCommands(CLI::App& parent, CommandContext& context);    // serving_commands.cc
// `bench serve`, added to the bench family by RegisterBenchCommands.       // serving_commands.cc
void RegisterBenchServeCommand(CLI::App* bench, CommandContext& context);
void RegisterBundleCommands(CLI::App& parent, CommandContext& context);   // bundle_commands.cc
void RegisterTlsCommands(CLI::App& parent, CommandContext& context);      // tls_commands.cc
void RegisterDashboardCommands(CLI::App& parent, CommandContext& context);  // dashboard_commands.cc

}  // namespace spark::cli
