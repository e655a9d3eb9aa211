// `sparkctl net verify`: proves the applied fabric works, from every node at once (one SSH round
// trip per node; the pings of a node run in parallel):
//   reach      every fabric address of every other node answers (non-adjacent ones through
//              the neighbours' forwarding);
//   df         a don't-fragment ping of MTU-28 bytes crosses every link (jumbo frames end to end);
//   route      each planned primary route is the one the kernel uses (not the backup);
//   next-hop   each neighbour address answers with the MAC of the expected node's netdev
//              (crossed twins or a swapped cable show up here);
//   link       every planned fabric netdev has carrier;
//   wireguard  every other node answers on its control-plane address.
// A failure names the cable (node, port, twin at both ends) to check.
// Thread-safety: functions.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "sparkctl/fabric/fabric_plan.h"
#include "sparkctl/ssh/transport.h"

namespace spark::fabric {

struct VerifyCheck {
  std::string node;    // where the check ran
  std::string kind;    // reach, df, route, next-hop, link, wireguard
  std::string target;  // address, subnet or netdev
  bool ok = false;
  std::string detail;  // what was seen, on failure what to do
  std::string cable;   // the cable to check ("" when not tied to one)
};

struct VerifyReport {
  std::vector<VerifyCheck> checks;
  std::vector<std::string> suspect_cables;  // cables with a failing link/df/next-hop check
  double seconds = 0;

  size_t Failures() const;
  bool ok() const { return Failures() == 0; }
  // One line per failure and one per suspect cable; "" when everything passed.
  std::string Summary() const;
};

struct VerifyOptions {
  bool wireguard = true;  // ping the control plane too. Default: on.
};

// Runs the checks of `changes` (as PlanChanges returned them; the snapshots give the MACs). A
// failing check is a value in the report; errors are only connection errors of a node.
Result<VerifyReport> VerifyCluster(ssh::Transport& transport, const ClusterChanges& changes,
                                   const VerifyOptions& options = {});

// The cable a fabric interface of `node` belongs to: "cable 0: spark-0 p0 twin a (enp1s0f0np0)
// <-> spark-1 p1 twin a (enp1s0f1np1)", or "... <-> switch" on switched fabrics.
std::string CableLabel(const ClusterChanges& changes, const std::string& node,
                       const std::string& netdev);

}  // namespace spark::fabric
