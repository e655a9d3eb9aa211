#include "base/command_line.h"

#include <cstdio>

#include "base/logging.h"
#include "base/strings.h"

namespace spark {
namespace {

// The deepest command the user named ("sparkctl profile chek": profile).
const CLI::App* Deepest(const CLI::App* app) {
  for (const CLI::App* sub : app->get_subcommands()) return Deepest(sub);
  return app;
}

std::string CommandPath(const CLI::App* app) {
  std::string path;
  for (; app != nullptr; app = app->get_parent()) {
    path = app->get_name() + (path.empty() ? "" : " " + path);
  }
  return path;
}

}  // namespace

std::string UnknownWordMessage(const CLI::App& app) {
  const std::vector<std::string> left = app.remaining(/*recurse=*/true);
  if (left.empty()) return "";
  const CLI::App* cmd = Deepest(&app);
  const std::string& word = left.front();
  const std::string where = CommandPath(cmd);
  if (word.size() > 1 && word[0] == '-') {
    std::vector<std::string> flags;
    for (const CLI::App* a = cmd; a != nullptr; a = a->get_parent()) {
      for (const CLI::Option* o : a->get_options()) {
        for (const std::string& name : o->get_lnames()) flags.push_back("--" + name);
        for (const std::string& name : o->get_snames()) flags.push_back("-" + name);
      }
    }
    const std::string flag = word.substr(0, word.find('='));
    return where + ": unknown flag '" + flag + "'" + DidYouMean(flag, flags) + " (see " + where +
           " --help)";
  }
  std::vector<std::string> names;
  for (const CLI::App* sub : cmd->get_subcommands([](const CLI::App*) { return true; })) {
    if (!sub->get_group().empty()) names.push_back(sub->get_name());
  }
  if (names.empty()) {
    return where + ": unexpected argument '" + word + "' (see " + where + " --help)";
  }
  return where + ": unknown command '" + word + "'" + DidYouMean(word, names) + " (see " + where +
         " --help)";
}

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
    // A word we do not know explains more than what it left missing ("A subcommand is
    // required", "--profile is required").
    if (const std::string unknown = UnknownWordMessage(app); !unknown.empty()) {
      std::fprintf(stderr, "%s\n", unknown.c_str());
      return kExitFailed;
    }
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
