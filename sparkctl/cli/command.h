// sparkctl's command families: one explicit list of them (command_table.cc), each registering
// its subcommands on the CLI11 app through base/command_line.h's bootstrap. Only commands that
// work are registered.
//
// Conventions every command follows (docs/cli.md): those of base/command_line.h, and cluster
// commands take -c/--cluster FILE (default ./cluster.yaml, AddClusterFlag), model commands
// -p/--profile FILE; commands that change nodes show the plan and ask unless --yes.
#pragma once

#include <map>
#include <string>

#include "base/command_line.h"
#include "base/status.h"

namespace spark::cli {

// Prints a failed Status to stderr as "sparkctl: <message>" and returns kExitFailed. With a
// `json_schema` (the command ran with --json), stdout also gets the command's JSON document in
// that schema: {"schema": ..., "ok": false, "error": {"code": ..., "message": ...}}, so a
// script reading stdout sees the failure even when the command stopped before its work.
int ReportError(const Status& status, const std::string& json_schema = "");

// The folder this sparkctl binary is in, and the spark-engine beside it (what `up` installs and
// what profile checks ask; --engine overrides both).
std::string SelfDir();
std::string DefaultEngineBinary();

// HF_TOKEN, HF_ENDPOINT and hf's telemetry/update-check switches from sparkctl's environment
// (read by the configuration layer in app.cc, weights::kHubVariables), which `weights fetch`
// hands to `hf` on the nodes; unset ones are absent.
std::map<std::string, std::string> HubEnvironment();

}  // namespace spark::cli
