// `sparkctl net apply` and `net reset`: change the nodes as PlanChanges (fabric_plan.h) says,
// safely.
//
// Apply, per node with changes, all nodes in parallel:
//   1. arm: back up the files about to change, write a rollback script that restores the state
//      read before apply (DiffState(desired, before), WireGuard link, files), save the state
//      before sparkctl's FIRST apply for reset (/etc/sparkctl/fabric/pre-apply.snapshot), and
//      start a detached timer on the node (`setsid sh -c 'sleep N; rollback'`), like
//      `netplan try`;
//   2. write the files (Transport::WriteFile: netplan YAML 0600, sysctl.d, WireGuard conf);
//   3. run the runtime changes (sysctl, iproute2) and (re)load WireGuard (kernel module, else
//      wireguard-go) in one script, which ends by printing the RoCE GID tables when the node's
//      NCCL_IB_GID_INDEX is still unknown (its entry appears with the fabric addresses);
// then verify (verify.h). Only when every node applied and verify passed are the timers
// cancelled ("confirmed"); otherwise the controller runs every armed node's rollback at once,
// and if the controller dies or loses the nodes, the timers do it by themselves.
// The management netdev is never in a plan (PlanChanges refuses), so no step touches it.
//
// Reset restores the state saved before the first apply (runtime and sysctls), deletes the
// WireGuard link and every file sparkctl wrote, and checks that nothing differs afterwards.
// Thread-safety: functions; the Transport must be thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "sparkctl/fabric/fabric_plan.h"
#include "sparkctl/fabric/fabric_verify.h"
#include "sparkctl/ssh/transport.h"

namespace spark::fabric {

struct ApplyOptions {
  PlanOptions plan;
  // The node restores its previous state by itself unless apply confirms within this time.
  // Default: 120 s.
  std::chrono::seconds rollback_after{120};
  // Confirm only when `net verify` passes. Default: on. Off: confirm once every node applied.
  bool require_verify = true;
  VerifyOptions verify;
};

struct NodeOutcome {
  std::string node;
  size_t changes = 0;
  Status status;  // the node's apply (or reset) error, naming the failed command
};

struct ApplyReport {
  ClusterChanges changes;  // the plan that was applied
  std::vector<NodeOutcome> nodes;
  std::optional<VerifyReport> verify;
  bool rolled_back = false;
  std::string rollback_reason;
  Status rollback_status;  // how the rollback went (state compared with the state before)
  double seconds = 0;

  // OK when applied and confirmed; otherwise why not (Aborted: rolled back).
  Status Outcome() const;
};

// Plans, then applies what differs. Errors: those of PlanChanges and EnsureWireGuardKeys; a
// failed node apply or verify is reported in ApplyReport (rolled back), not as an error.
Result<ApplyReport> ApplyCluster(ssh::Transport& transport, const netplan::ClusterSpec& spec,
                                 const ApplyOptions& options);

// The steps of ApplyCluster, for tests that stop half way (e.g. to let a timer fire).
// Arm: backups, rollback script, saved snapshot, timer. Errors of Run; Aborted naming the node.
Status ArmRollback(ssh::Transport& transport, const NodeChanges& node,
                   std::chrono::seconds rollback_after);
// Files, runtime changes, WireGuard; when node.gid_pending, waits for the new addresses' RoCE v2
// GID and stores its index in *gid_index (same SSH round trip; ApplyCluster puts it into the
// plan with SetGidIndex). Aborted naming the node and the command that failed;
// FailedPrecondition from FindGidIndex when no RoCE v2 IPv4 GID came.
Status ApplyNode(ssh::Transport& transport, const NodeChanges& node, int* gid_index = nullptr);
// Runs the node's armed rollback now. NotFound when nothing is armed there.
Status RollbackNode(ssh::Transport& transport, const std::string& node);
// Cancels the node's timer; the applied state stays.
Status ConfirmNode(ssh::Transport& transport, const std::string& node);

// The shell text of the rollback script (exposed for unit tests).
std::string RollbackScript(const NodeChanges& node);

struct ResetReport {
  std::vector<NodeOutcome> nodes;
  double seconds = 0;
};

// Resets every node. Errors: connection errors; a node whose state still differs from the
// saved one afterwards is an error in its NodeOutcome.
Result<ResetReport> ResetCluster(ssh::Transport& transport, const netplan::ClusterSpec& spec,
                                 const PlanOptions& options);

// What reset would run on a node (commands, then the files it removes). `saved` is the parsed
// pre-apply snapshot, or nullopt when the node has none (then netplan's ResetCommands are used).
std::vector<std::string> ResetScriptLines(const NodeChanges& node,
                                          const std::optional<NodeSnapshot>& saved);

}  // namespace spark::fabric
