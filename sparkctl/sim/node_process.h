// Processes of a simulated Spark: the holder that keeps the node's UTS and mount namespaces
// alive, its sshd, commands run inside the node, and killing everything in a namespace.
// Thread-safety: functions only; safe for different nodes from different threads.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "sparkctl/sim/cluster_state.h"
#include "base/process.h"

namespace spark::sim {

// Starts `ip netns exec NETNS unshare --uts --mount --propagation private sh SETUP` detached
// (own session, reparented away from the caller) and waits for the script's "ready <pid>".
// Returns the holder's pid; Internal with the tail of LOG when the setup fails.
Result<int> StartHolder(const std::string& netns, const std::string& setup_script,
                        const std::string& log_path);

// argv that runs `command` in the node's network, mount and UTS namespaces.
std::vector<std::string> InNode(const NodeState& node, const std::vector<std::string>& command);

// Starts the node's sshd with its memlock limit and waits until port 22 accepts connections.
Status StartSshd(Runner& runner, const std::string& cluster_dir, const NodeState& node);
// Stops the sshd listener (open sessions live on, like `systemctl stop ssh`).
Status StopSshd(const std::string& cluster_dir, const NodeState& node);

// Waits until a TCP connect to address:port succeeds. DeadlineExceeded after timeout_ms.
Status WaitForTcp(const std::string& address, int port, int timeout_ms);

// Pids of the processes in a network namespace (empty when it does not exist).
std::vector<int> NetnsPids(Runner& runner, const std::string& netns);

// SIGKILLs every process in the namespace and waits until they are gone.
Status KillNetnsProcesses(Runner& runner, const std::string& netns);

// SIGKILLs the node's processes whose command line contains `pattern` (never the holder).
// Returns how many were killed.
Result<int> KillMatching(Runner& runner, const NodeState& node, const std::string& pattern);

// True while pid names a live (non-zombie) process.
bool ProcessAlive(int pid);

}  // namespace spark::sim
