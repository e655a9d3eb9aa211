// `sparkctl weights fetch -p PROFILE`: downloads the profile's pinned repository revision from
// the Hugging Face Hub with the `hf` CLI on one node (rank 0's by default) or on every node,
// then writes the manifest (or checks the download against the profile's manifest) and copies
// the rest node to node with `weights sync` (sync.h), over the fabric when it is up.
//
// Steps, each failing with the node, the repository/revision and the fix:
//  1. Preflight on every downloading node, one SSH command each: `hf` is there (else the install
//     command), the Hub resolves the revision to the pinned commit and lists its files (gated:
//     PermissionDenied; missing repository or revision: NotFound), model.path has room.
//     An existing manifest must describe that commit (sizes, LFS SHA-256s) before any byte moves.
//  2. `hf download REPO --revision COMMIT --local-dir model.path` started detached on each node
//     (setsid; state in model.path/.cache/sparkctl/: pid, log, exit status), so an interrupted
//     controller leaves it running and the next fetch attaches to it. hf resumes a dropped
//     connection within its run (a Range request); after a killed hf the next fetch keeps the
//     finished files and hf restarts the unfinished ones (hf 2.x never reuses another process's
//     partial file, so those leftovers are removed). The controller polls the directory's bytes
//     against the Hub's total for progress and ETA.
//  3. No manifest yet: `sparkctl weights manifest` on the first downloading node, checked against
//     the Hub's sizes and LFS SHA-256s, written on the controller (model.manifest, or
//     checkpoints/OWNER--NAME/REVISION.json beside the profile).
//  4. SyncNodes with that manifest: every node verified, missing files copied along the ring.
//
// HF_TOKEN / HF_ENDPOINT reach `hf` on the nodes on the command's stdin (never a command line).
// Thread-safety: FetchFromHub blocks; callbacks come from the calling thread.
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
#include "sparkctl/weights/hub_listing.h"
#include "sparkctl/weights/sync.h"

namespace spark::weights {

inline constexpr char kHubFetchSchema[] = "sparkctl-weights-fetch/v1";

// The controller's environment variables that reach `hf` on the nodes (on stdin, so a token is
// never on a command line): the token, the Hub's address, and the two switches that keep `hf`
// from calling home.
inline constexpr const char* kHubVariables[] = {
    "HF_TOKEN", "HF_ENDPOINT", "HF_HUB_DISABLE_TELEMETRY", "HF_HUB_DISABLE_UPDATE_CHECK"};
bool IsHubVariable(const std::string& name);

struct HubFetchOptions {
  std::string node;           // download here; empty: the first node in ring (rank) order
  bool each_node = false;     // download on every node (each over its own internet link)
  std::string sparkctl_path;  // empty: this build's bundle, installed on each node
  // Environment for `hf` on the nodes; only the kHubVariables are passed.
  std::map<std::string, std::string> hub_env;
  std::chrono::milliseconds poll_interval{std::chrono::seconds(2)};
  SyncOptions sync;  // port, connect timeout, on_event for the sync step
  std::function<void(const std::string& line)> on_event;
  // After every poll: bytes in the downloading nodes' model.path against the Hub's total.
  std::function<void(uint64_t done, uint64_t total, uint64_t at_start, double seconds)> on_progress;
};

struct NodeDownload {
  std::string node;
  Status status;
  bool attached = false;      // a download started earlier was still running
  uint64_t bytes_before = 0;  // in model.path when this download (re)started
  uint64_t bytes_after = 0;
  double seconds = 0;
};

struct HubFetchReport {
  HubListing hub;
  std::vector<NodeDownload> downloads;
  std::string manifest_path;
  bool manifest_written = false;     // false: the profile's manifest was checked instead
  bool manifest_in_profile = false;  // model.manifest names manifest_path
  std::string manifest_field;  // when written and not in the profile: the model.manifest to add
  SyncReport sync;
  double seconds = 0;

  bool ok() const;
};

// The whole fetch. Errors before any download (bad node name, preflight, a manifest that does
// not describe the pinned commit, no room) are returned; a failed download is in its
// NodeDownload and stops before the manifest and sync steps.
Result<HubFetchReport> FetchFromHub(ssh::Transport& transport, const netplan::ClusterSpec& cluster,
                                    const profile::Profile& profile,
                                    const HubFetchOptions& options);

// The Hub's listing of `repository` at `revision` from the `hf` CLI on this machine (which reads
// HF_TOKEN / HF_ENDPOINT from its environment itself): what `weights manifest --check-hub`
// compares a local copy's manifest with. Errors of ParseHubListing and HubCommandError (node
// "this machine"; `fix_in` names what to fix, e.g. the profile file).
Result<HubListing> ListHubRevisionHere(const std::string& repository, const std::string& revision,
                                       const std::string& fix_in);

// Where the manifest of a profile without model.manifest goes: checkpoints/OWNER--NAME/REV.json
// in the profile's folder.
std::string DefaultManifestPathFor(const profile::Profile& profile);

// JSON (schema kHubFetchSchema) and the text summary for people.
std::string FormatHubFetchJson(const HubFetchReport& report);
std::string FormatHubFetchText(const HubFetchReport& report);

}  // namespace spark::weights
