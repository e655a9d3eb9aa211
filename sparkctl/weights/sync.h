// `sparkctl weights sync`: brings every node to a verified copy of the profile's checkpoint by
// copying missing or corrupt files from nodes that hold good ones, node to node over TCP
// (sync_node.h), never through the controller.
//
// Plan: verify every node (cluster_verify.h); for each file that some node lacks, the chain
// starts at a node whose copy verified ok and walks the ring in rank order: each node that
// needs the file fetches it from its ring predecessor (its direct cable on a ring), which has
// it either already or from the step before. So each byte crosses each hop once.
// Pipelining is per file: every receiver works through the manifest's files in order and starts
// file k as soon as its predecessor holds it, so while node r fetches file k from r-1, node r+1
// fetches file k-1 from r — all hops busy at once for multi-file checkpoints.
// Addresses: a node serves its ring successor at its fabric address on the cable between them
// (20x the management link) when the fabric is up, i.e. the successor reaches that address;
// otherwise at its management address, with a warning that says why.
// Authentication: one random key per sync, handed to every serve and fetch over SSH on their
// stdin; a stream without it is refused (sync_node.h has the handshake).
// Servers are started detached (setsid) and stopped with a QUIT at the end, because the SSH
// transport runs one command per node at a time: a server held in a running command would block
// its own node's fetches.
// Thread-safety: SyncNodes blocks and runs one thread per receiving node.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "netplan/cluster_spec.h"
#include "sparkctl/profile/profile.h"
#include "sparkctl/ssh/transport.h"
#include "sparkctl/weights/cluster_verify.h"
#include "sparkctl/weights/manifest.h"
#include "sparkctl/weights/sync_node.h"

namespace spark::weights {

struct Transfer {
  std::string file;
  uint64_t size = 0;
  std::string sha256;
  std::string from;  // node name (ring predecessor of `to`)
  std::string to;
};

struct SyncPlan {
  std::vector<std::string> ring;        // node names in ring order
  std::vector<Transfer> transfers;      // a transfer's source is ready before it in this order
  std::map<std::string, uint64_t> bytes_in;  // per receiving node
  uint64_t bytes_total = 0;             // over all hops
};

// The transfers that make every node hold every manifest file. FailedPrecondition when a node
// could not be checked (sync needs all of them) or when no node holds a verified copy of a file
// (names the file and the fix: download it on one node).
Result<SyncPlan> PlanSync(const Manifest& manifest, const ClusterVerifyReport& before);

struct SyncOptions {
  std::string sparkctl_path;  // empty: this build's bundle, installed on each node
  int port = kDefaultSyncPort;
  bool plan_only = false;  // verify and plan, move nothing
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
  // Progress lines for people ("spark-2 <- spark-1: a.bin 10.0 GiB in 9.8 s, 1.0 GiB/s").
  std::function<void(const std::string& line)> on_event;
};

struct SyncReport {
  SyncPlan plan;
  std::vector<std::string> errors;  // one per failed transfer / server, naming node and file
  std::map<std::string, std::string> addresses;  // serving node -> "ADDR:PORT" it served at
  std::vector<std::string> warnings;             // e.g. the fabric is down: management LAN
  uint64_t bytes_moved = 0;
  double seconds = 0;
  ClusterVerifyReport after;  // the final verify (empty when plan_only)

  bool ok() const { return errors.empty() && (after.nodes.empty() || after.ok()); }
};

// Verify, plan, copy, verify again. `addresses` maps node name -> address the other nodes reach
// it at. Returns an error only when nothing could be attempted (bad manifest, PlanSync's
// errors, not enough free space on a receiver: ResourceExhausted naming node, dir, need and free);
// transfer failures are in SyncReport::errors.
Result<SyncReport> SyncNodes(ssh::Transport& transport, const std::vector<std::string>& ring,
                             const std::map<std::string, std::string>& addresses,
                             const std::string& manifest_path, const std::string& manifest_text,
                             const std::string& dir, const SyncOptions& options = {});

// Pure: the fabric address at which each node of a discovered inventory serves its ring
// successor: its address on the cable to it (twin a first), or its first fabric address when
// the two are not cabled (a line's ends, switched fabrics: rail 0). Empty when the inventory
// has no fabric plan (not discovered); the reason in *why.
std::map<std::string, std::string> FabricSyncAddresses(const netplan::ClusterSpec& cluster,
                                                       std::string* why);

// SyncNodes for a profile's manifest and model.path on the inventory's nodes (ring order), over
// the fabric where each receiver reaches its source's fabric address (one ping over SSH per
// receiver), else over the management LAN with a warning (SyncReport::warnings, on_event).
Result<SyncReport> SyncOnAllNodes(ssh::Transport& transport, const netplan::ClusterSpec& cluster,
                                  const profile::Profile& profile, const SyncOptions& options = {});

// SyncOnAllNodes with a manifest given as text (e.g. one `weights fetch` just made) and the
// directory every node keeps the copy in.
Result<SyncReport> SyncManifestOnAllNodes(ssh::Transport& transport,
                                          const netplan::ClusterSpec& cluster,
                                          const std::string& dir, const std::string& manifest_path,
                                          const std::string& manifest_text,
                                          const SyncOptions& options = {});

// The sparkctl each node runs: `given` on every node when set, else this build's bundle for the
// node's machine, installed there (bundle::EnsureProgram). Errors name each failing node.
Result<std::map<std::string, std::string>> NodeSparkctlPaths(
    ssh::Transport& transport, const std::vector<std::string>& nodes, const std::string& given);

}  // namespace spark::weights
