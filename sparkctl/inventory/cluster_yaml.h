// Reading and writing cluster inventories (cluster.yaml, schema sparkctl-cluster/v1; reference in
// docs/cluster.md). Errors are "file:line:column: key: message", all of them in one Status.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "netplan/cluster_spec.h"

namespace spark::inventory {

// Loads and validates. NotFound when the file is missing (with a hint to run discover or
// sim create); InvalidArgument listing every problem.
Result<netplan::ClusterSpec> LoadClusterFile(const std::string& path);
Result<netplan::ClusterSpec> ParseCluster(const std::string& text, const std::string& file);

// The inventory as YAML text, keys in schema order; ParseCluster(ToYaml(x)) == x.
std::string ToYaml(const netplan::ClusterSpec& spec);
nlohmann::ordered_json ToJson(const netplan::ClusterSpec& spec);

// Writes atomically (temp file + rename) so a crash never leaves half an inventory.
Status WriteClusterFile(const netplan::ClusterSpec& spec, const std::string& path);

}  // namespace spark::inventory
