// The launch plan of `sparkctl up`: which spark-engine process runs on which node, with which
// command line, environment and files, and the one shell command that starts (or stops) each
// rank as a supervised service. Pure: no I/O, so plans are unit tested without nodes.
//
// Per rank r on its node:
//   /run/sparkctl/up/<cluster>/rank<r>.json   the engine's status file (phase, progress)
//   /run/sparkctl/up/<cluster>/rank<r>.pid    the engine's pid (both supervision modes)
//   /var/log/sparkctl/<cluster>-rank<r>.log   stdout and stderr of the engine, appended
// Supervision: a transient systemd unit `sparkctl-<cluster>-rank<r>` (systemd-run) where systemd
// runs, otherwise a setsid'd process with the pidfile (no restart by itself: a restarted rank
// cannot rejoin its group, so recovery restarts the whole model; see monitor.h).
// Thread-safety: values and pure functions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "netplan/cluster_spec.h"
#include "netplan/node_plan.h"
#include "netplan/oneshot_links.h"
#include "sparkctl/profile/profile.h"

namespace spark::up {

inline constexpr char kNodeRunDir[] = "/run/sparkctl/up";
inline constexpr char kNodeLogDir[] = "/var/log/sparkctl";
inline constexpr char kRemoteEnginePath[] = "/usr/local/lib/sparkctl/spark-engine";

struct LaunchOptions {
  // Where the engine binary is on every node. Default: kRemoteEnginePath.
  std::string engine_path = kRemoteEnginePath;
  // SHA-256 of the engine binary (part of the launch hash: a new build restarts the model).
  std::string engine_sha256;
  // Rendezvous port on rank 0's control address. Default: 29500.
  int master_port = 29500;
  // Address of each node's control traffic (engine rendezvous, Gloo, NCCL bootstrap): its
  // WireGuard address when the tunnel works (fabric/control_plane.h). A node missing here uses
  // its management address.
  std::map<std::string, std::string> control_addresses;
  // SIGTERM, then SIGKILL after this many seconds. Default: 20.
  int stop_deadline_s = 20;
  // NCCL environment per node name (from the fabric plan); empty for none.
  std::map<std::string, std::vector<netplan::EnvVar>> nccl_env;
  // The engine bundle's NCCL tuner plugin on the nodes (bundle::kTunerPlugin); "" when the
  // bundle has none. Nodes with an NCCL environment get NCCL_TUNER_PLUGIN naming it unless the
  // profile's env sets it.
  std::string nccl_tuner_plugin;
  // The one-shot transport's links per node name (netplan/oneshot_links.h), for profiles with
  // engine.collectives.oneshot_max_bytes.
  std::map<std::string, netplan::OneShotLinks> oneshot_links;
  // Planning before the fabric step (`up` checks the profile against the cluster first): the
  // one-shot links are not known yet and not required.
  bool links_pending = false;
};

struct RankLaunch {
  int rank = 0;
  std::string node;     // inventory name
  std::string address;  // management address (the SSH target)
  std::string control_address;  // rendezvous/Gloo/NCCL bootstrap: WireGuard or management
  std::vector<std::string> argv;           // engine command line, argv[0] the binary
  std::vector<netplan::EnvVar> env;        // NCCL env, then the profile's env (profile wins)
  std::string unit;                        // systemd unit name
  std::string status_path;
  std::string pid_path;
  std::string log_path;
};

struct LaunchPlan {
  std::string cluster;      // cluster name used in unit and file names
  std::string hash;         // SHA-256 of everything that, when changed, needs a restart
  std::string served_name;  // "model" in API requests
  std::string endpoint;     // "http://127.0.0.1:8000" as seen on rank 0's node
  std::string api_node;     // node of rank 0
  std::string api_key_file; // "" when the endpoint has no key
  std::string tls_cert;         // "" for plain HTTP; else the certificate on api_node
  std::string tls_fingerprint;  // its SHA-256 fingerprint, read by `up`
  std::string advertised_host;  // where clients reach the endpoint (the cert must cover it)
  bool clear_text = false;      // off loopback without TLS: the key travels in clear text
  std::string memlock;      // "unlimited" or KiB
  int stop_deadline_s = 20;
  std::vector<RankLaunch> ranks;  // by rank
};

// The ranks of `cluster` (ordered by rank) running `profile`. FailedPrecondition when the
// inventory has no ranks (run `sparkctl discover`) or fewer nodes than the profile's topology,
// InvalidArgument when the profile's tp does not match nodes x GPUs per node.
Result<LaunchPlan> PlanLaunch(const profile::Profile& profile, const netplan::ClusterSpec& cluster,
                              const LaunchOptions& options);

// Shell command (run as root on the rank's node) that starts the rank in the background and
// returns once its pidfile is written. `systemd`: use systemd-run instead of setsid.
std::string StartCommand(const LaunchPlan& plan, const RankLaunch& rank, bool systemd);

// Shell command that stops the rank: SIGTERM, waits up to the plan's deadline, then SIGKILL;
// removes the pidfile. Exits 0 whether or not the rank was running. Prints "stopped PID",
// "killed PID" or "not running".
std::string StopCommand(const LaunchPlan& plan, const RankLaunch& rank);

// Base name of the cluster for file and unit names: [A-Za-z0-9_-] only, "cluster" when empty.
std::string SafeName(std::string_view name);

}  // namespace spark::up
