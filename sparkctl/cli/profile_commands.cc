// `sparkctl profile check FILE...` and `sparkctl profile show FILE [--json]`.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sparkctl/cli/families.h"
#include "sparkctl/cli/json_yaml.h"
#include "sparkctl/profile/profile_json.h"
#include "sparkctl/profile/profile_yaml.h"

namespace spark::cli {
namespace {

constexpr char kCheckSchema[] = "sparkctl-profile-check/v1";

struct CheckOptions {
  std::vector<std::string> files;
  bool json = false;
  std::string engine;  // default: the spark-engine beside sparkctl
};

nlohmann::ordered_json ProblemJson(const YamlProblem& p) {
  return {{"file", p.file},          {"line", p.location.line}, {"column", p.location.column},
          {"key", p.key},            {"message", p.message}};
}

int RunCheck(const CheckOptions& options) {
  auto engine = profile::QueryEngine(options.engine.empty() ? DefaultEngineBinary()
                                                            : options.engine);
  if (!engine.ok()) {
    return ReportError(engine.status(), options.json ? kCheckSchema : "");
  }
  int failed = 0;
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (const std::string& file : options.files) {
    const profile::ProfileCheck check = profile::CheckProfileFile(file, &*engine);
    nlohmann::ordered_json problems = nlohmann::ordered_json::array();
    for (const YamlProblem& p : check.problems) problems.push_back(ProblemJson(p));
    nlohmann::ordered_json result = {{"file", file}, {"ok", check.ok()}};
    if (check.profile) result["name"] = check.profile->name;
    result["problems"] = problems;
    result["notes"] = check.notes;
    results.push_back(result);
    if (check.ok()) {
      if (!options.json) std::printf("ok      %s (%s)\n", file.c_str(), check.profile->name.c_str());
      for (const std::string& n : check.notes) {
        if (!options.json) std::printf("  note: %s\n", n.c_str());
      }
      continue;
    }
    ++failed;
    if (options.json) continue;
    std::printf("FAILED  %s (%zu problem%s)\n", file.c_str(), check.problems.size(),
                check.problems.size() == 1 ? "" : "s");
    for (const YamlProblem& p : check.problems) {
      std::string text = p.ToString();
      for (size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', at + 1)) {
        text.insert(at + 1, "    ");  // a message's own lines stay under it
      }
      std::printf("  %s\n", text.c_str());
    }
    for (const std::string& n : check.notes) std::printf("  note: %s\n", n.c_str());
  }
  if (options.json) {
    nlohmann::ordered_json out = {{"schema", kCheckSchema}, {"ok", failed == 0},
                                  {"results", results}};
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("%zu profile(s) checked, %d failed\n", options.files.size(), failed);
  }
  return failed == 0 ? kExitOk : kExitFailed;
}

struct ShowOptions {
  std::string file;
  bool json = false;
};

int RunShow(const ShowOptions& options) {
  auto profile = profile::LoadProfileFile(options.file);
  if (!profile.ok()) return ReportError(profile.status());
  nlohmann::ordered_json json = profile::ToJson(*profile);
  if (options.json) {
    std::printf("%s\n", json.dump(2).c_str());
  } else {
    std::printf("# %s, fully resolved (defaults filled)\n%s", options.file.c_str(),
                JsonToYamlText(json).c_str());
  }
  return kExitOk;
}

}  // namespace

void RegisterProfileCommands(CLI::App& parent, CommandContext& context) {
  CLI::App* profile = parent.add_subcommand("profile", "Validate and inspect model profiles");
  profile->require_subcommand(1);

  auto check = std::make_shared<CheckOptions>();
  CLI::App* c = profile->add_subcommand(
      "check", "Validate profiles; every problem is reported as file:line:column: key: message");
  c->add_option("files", check->files, "Profile files (YAML, schema sparkctl-profile/v1)")
      ->required();
  AddJsonFlag(c, &check->json, kCheckSchema);
  c->add_option("--engine", check->engine,
                "spark-engine whose capabilities the engine fields are checked against "
                "(default: the one beside sparkctl; it runs `spark-engine info --json`)");
  SetExample(c, "sparkctl profile check profiles/*.yaml");
  c->callback([check, &context] { context.exit_code = RunCheck(*check); });

  auto show = std::make_shared<ShowOptions>();
  CLI::App* s = profile->add_subcommand("show", "Print a profile with every default filled in");
  s->add_option("file", show->file, "Profile file")->required();
  AddJsonFlag(s, &show->json);
  SetExample(s, "sparkctl profile show profiles/qwen3-tiny-demo.yaml --json");
  s->callback([show, &context] { context.exit_code = RunShow(*show); });
}

}  // namespace spark::cli
