// Reading profiles (sparkctl-profile/v1) from YAML. Every problem is reported as
// "file:line:column: key: message", all of them in one error.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/yaml_reader.h"
#include "sparkctl/profile/engine_capabilities.h"
#include "sparkctl/profile/profile.h"

namespace spark::profile {

// Loads, fills defaults and validates; with `engine`, also the engine fields against what that
// spark-engine supports (engine_capabilities.h). InvalidArgument listing every problem; NotFound
// when the file is missing.
Result<Profile> LoadProfileFile(const std::string& path,
                                const EngineCapabilities* engine = nullptr);
Result<Profile> ParseProfile(const std::string& text, const std::string& file,
                             const EngineCapabilities* engine = nullptr);

// What `sparkctl profile check` (and `up`) report: every problem of one file, each with its
// line, column and key: the document's shape, the rules of Validate() (also where the shape is
// wrong elsewhere; not twice for one key), the engine's capabilities and, when `check_files`,
// whether the files the profile names (model.manifest) exist here and, where this machine has
// a copy of the checkpoint (model.path/config.json), what the engine makes of it (model type,
// backend, tp; engine_capabilities.h QueryModel).
struct ProfileCheck {
  std::optional<Profile> profile;  // when there is no problem
  std::vector<YamlProblem> problems;
  std::vector<std::string> notes;  // checks that could not run here, and why

  bool ok() const { return problems.empty(); }
  // InvalidArgument with one problem per line (NotFound when the file is missing), or OK.
  Status ToStatus() const;
};

ProfileCheck CheckProfileFile(const std::string& path, const EngineCapabilities* engine,
                              bool check_files = true);
ProfileCheck CheckProfileText(const std::string& text, const std::string& file,
                              const EngineCapabilities* engine, bool check_files = false);

// The manifest path with a relative model.manifest resolved against the profile's folder.
std::string ResolvedManifestPath(const Profile& profile);

}  // namespace spark::profile
