#include "sparkctl/cli/json_yaml.h"

#include <yaml-cpp/yaml.h>

namespace spark::cli {
namespace {

void Emit(YAML::Emitter& out, const nlohmann::ordered_json& v) {
  if (v.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [key, child] : v.items()) {
      out << YAML::Key << key << YAML::Value;
      Emit(out, child);
    }
    out << YAML::EndMap;
  } else if (v.is_array()) {
    bool scalars = true;
    for (const auto& child : v) scalars = scalars && !child.is_structured();
    if (scalars) out << YAML::Flow;
    out << YAML::BeginSeq;
    for (const auto& child : v) Emit(out, child);
    out << YAML::EndSeq;
  } else if (v.is_null()) {
    out << YAML::Null;
  } else if (v.is_string()) {
    out << v.get<std::string>();
  } else if (v.is_boolean()) {
    out << (v.get<bool>() ? "true" : "false");
  } else {
    out << v.dump();
  }
}

}  // namespace

std::string JsonToYamlText(const nlohmann::ordered_json& value) {
  YAML::Emitter out;
  Emit(out, value);
  return std::string(out.c_str()) + "\n";
}

}  // namespace spark::cli
