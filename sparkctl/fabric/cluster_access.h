// Reaching a cluster's nodes: the SSH settings of cluster.yaml as ssh::NodeSpecs and the libssh
// Transport built from them (strict host-key checking against the inventory's known_hosts).
// Thread-safety: functions.
#pragma once

#include <memory>
#include <vector>

#include "base/status.h"
#include "netplan/cluster_spec.h"
#include "sparkctl/ssh/node.h"
#include "sparkctl/ssh/transport.h"

namespace spark::fabric {

// One NodeSpec per inventory node, in inventory order ("~/" in paths expands to $HOME).
std::vector<ssh::NodeSpec> SshNodes(const netplan::ClusterSpec& spec);

// InvalidArgument for an invalid NodeSpec. Connects lazily.
Result<std::unique_ptr<ssh::Transport>> OpenTransport(const netplan::ClusterSpec& spec);

}  // namespace spark::fabric
