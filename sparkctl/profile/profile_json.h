// JSON rendering of a fully resolved profile (defaults filled), for `sparkctl profile show`.
#pragma once

#include <nlohmann/json.hpp>

#include "sparkctl/profile/profile.h"

namespace spark::profile {

nlohmann::ordered_json ToJson(const Profile& profile);

}  // namespace spark::profile
