// Reading profiles (sparkctl-profile/v1) from YAML. Every problem is reported as
// "file:line:column: key: message", all of them in one error.
#pragma once

#include <string>

#include "base/status.h"
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

// The manifest path with a relative model.manifest resolved against the profile's folder.
std::string ResolvedManifestPath(const Profile& profile);

}  // namespace spark::profile
