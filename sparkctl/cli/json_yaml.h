// Renders JSON values as readable YAML-style text for the human form of `show` commands.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace spark::cli {

std::string JsonToYamlText(const nlohmann::ordered_json& value);

}  // namespace spark::cli
