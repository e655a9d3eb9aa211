// Lossless RoCE on switched fabrics: what each host needs so that RDMA traffic through a switch
// is neither dropped nor collapses under congestion. Through a switch (unlike a direct cable)
// several senders meet one egress port; RoCE v2 then needs
//   PFC    priority flow control on the RoCE priority (3), so the switch pauses instead of
//          dropping: `dcb pfc set dev X prio-pfc all:off 3:on`;
//   trust  the NIC classifying by DSCP, not by VLAN PCP (there are no VLANs on the fabric), with
//          DSCP 26 mapped to priority 3: `dcb apptrust set dev X order dscp`,
//          `dcb app replace dev X dscp-prio 26:3`;
//   ECN    DCQCN: the NIC as notification point (answers ECN-marked packets with CNPs) and as
//          reaction point (slows down on CNPs) on priority 3, through the mlx5 knobs
//          /sys/class/net/X/ecn/roce_np/enable/3 and /sys/class/net/X/ecn/roce_rp/enable/3;
//   NCCL   NCCL_IB_TC=106 (DSCP 26 << 2 | ECT(0)) so NCCL's queue pairs send on that class.
// The switch must match: PFC (no-drop) on priority 3 of every fabric port, DSCP trust with 26 on
// that priority, ECN marking (WRED/ECN thresholds) on its queue, and CNPs (DSCP 48) in a
// priority of their own (docs/fabric.md, "Switched fabrics").
// The settings are runtime state of the NIC: `net apply` sets them, `net reset` clears them,
// `selftest` checks them. Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

namespace spark::fabric {

inline constexpr int kRocePriority = 3;
inline constexpr int kRoceDscp = 26;
inline constexpr int kNcclIbTc = 106;  // DSCP 26 in the upper six bits, ECT(0) below

// One fabric netdev's lossless-RoCE state, as read by QosProbeCommand.
struct QosState {
  std::string netdev;
  bool read = false;        // the probe printed this netdev's section
  bool pfc = false;         // PFC on the RoCE priority
  bool pfc_others = false;  // PFC on some other priority too (a pause there stalls it)
  bool trust_dscp = false;  // DSCP first in the trust order
  bool dscp_prio = false;   // DSCP 26 -> priority 3
  bool ecn_np = false, ecn_rp = false;  // the mlx5 knobs of priority 3
  std::string raw;          // what the tools printed, for messages

  bool ok() const { return read && pfc && !pfc_others && trust_dscp && dscp_prio && ecn_np && ecn_rp; }
  // What is missing, e.g. "PFC off on priority 3, ECN reaction point off"; "" when ok.
  std::string Missing() const;
};

// Shell command printing every netdev's PFC map, trust order, DSCP map and ECN knobs.
std::string QosProbeCommand(const std::vector<std::string>& netdevs);
std::vector<QosState> ParseQosProbe(const std::vector<std::string>& netdevs,
                                    const std::string& output);

// Shell commands (one per line) that set / clear the settings above on `netdevs`. The reset
// tolerates failures (a netdev without DCB, settings already gone).
std::string QosApplyCommands(const std::vector<std::string>& netdevs);
std::string QosResetCommands(const std::vector<std::string>& netdevs);

}  // namespace spark::fabric
