#include "base/command_line.h"

#include <cstdio>

#include "base/logging.h"

namespace spark {

int RunCommandLine(const CommandLine& line, std::span<const CommandEntry> table, int argc,
                   char** argv) {
  CLI::App app{line.description, line.program};
  app.set_version_flag("--version", line.version);
  app.require_subcommand(1);
  app.fallthrough();
  if (!line.footer.empty()) app.footer(line.footer);
  CommandContext context;
  app.add_option("--log-level", context.log_level,
                 "trace, debug, info, warn (default), error or off; also SPARK_LOG_LEVEL");
  for (const CommandEntry& entry : table) entry.register_fn(app, context);
  app.parse_complete_callback([&] {
    if (context.log_level.empty()) {
      context.log_level = line.env_log_level.value_or("warn");
      context.log_level_given = line.env_log_level.has_value();
    } else {
      context.log_level_given = true;
    }
    Status s = InitLogging({.level = context.log_level});
    if (!s.ok()) throw CLI::ValidationError("--log-level", s.message());
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitFailed;
  }
  return context.exit_code;
}

int ReportCommandError(const std::string& program, const Status& status) {
  std::fprintf(stderr, "%s: %s\n", program.c_str(), status.message().c_str());
  return kExitFailed;
}

CLI::Option* AddClusterFlag(CLI::App* cmd, std::string* file, const std::string& help) {
  return cmd->add_option("-c,--cluster", *file, help);
}

CLI::Option* AddJsonFlag(CLI::App* cmd, bool* json, const std::string& schema) {
  return cmd->add_flag("--json", *json,
                       schema.empty() ? "Machine-readable output"
                                      : "Machine-readable output (" + schema + ")");
}

CLI::Option* AddYesFlag(CLI::App* cmd, bool* yes, const std::string& help) {
  return cmd->add_flag("--yes", *yes, help);
}

void SetExample(CLI::App* cmd, const std::string& example) {
  cmd->footer("\nExample:\n  " + example);
}

}  // namespace spark
