// What the memory plan needs from the nodes: each node's MemAvailable (read over SSH, one small
// command per node in parallel; the simulator emulates /proc/meminfo), and a config.json to plan
// with when this machine has no copy of the checkpoint (read from a node that has it).
// Thread-safety: functions that block their caller; the transport is shared.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "sparkctl/profile/memory_plan.h"
#include "sparkctl/profile/profile.h"
#include "sparkctl/ssh/transport.h"

namespace spark::up {

// MemAvailable of each of `nodes`, in order. The errors of the nodes that could not be read,
// joined and naming each node (Unavailable), or InvalidArgument for a meminfo without the line.
Result<std::vector<profile::NodeMemory>> ReadNodeMemory(ssh::Transport& transport,
                                                        const std::vector<std::string>& nodes);

// The checkpoint to plan with: `override_dir` when given; else model.path when this machine has
// its config.json; else, with a transport, that config.json read from `node` into
// `scratch_dir`/config.json. NotFound with the fix when none of them works.
Result<std::string> PlanCheckpoint(const profile::Profile& profile, const std::string& override_dir,
                                   ssh::Transport* transport, const std::string& node,
                                   const std::string& scratch_dir);

}  // namespace spark::up
