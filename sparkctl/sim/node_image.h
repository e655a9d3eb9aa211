// The emulated part of a simulated Spark: the files a GB10 running DGX OS shows at the OS
// interfaces sparkctl reads (kernel release, /proc/meminfo with CMA, /etc/machine-id,
// /etc/dgx-release, memlock limits, the /sys/class/infiniband tree for the four RoCE devices)
// and the stand-ins for DGX OS tools Debian lacks (nvidia-smi, ibdev2netdev, show_gids,
// update-grub, uname -r / -m, getconf GNU_LIBC_VERSION), DGX OS's /etc/os-release, and for
// bare-library clusters the /usr/lib view without the host's build libraries. Generated here, on the host, under the node's state directory; the
// node's setup script mounts them into its private mount namespace.
//
// Node directory layout (<cluster>/nodes/<hostname>/):
//   etc/        overlay upper layer over the node's /etc (machine-id, hostname, dgx-release,
//               security/limits.d/90-sparkctl-sim.conf; whatever the node writes to /etc)
//   proc/       osrelease and meminfo, bind-mounted over /proc/sys/kernel/osrelease, /proc/meminfo
//   bin/        bind-mounted over /usr/local/bin: the stand-in tools and sparksim-refresh
//   infiniband/ bind-mounted at /sys/class/infiniband (next to the netns' real class/net)
//   ssh/        host key and sshd_config;  setup.sh;  log/;  sshd.pid
//   usrlib/, usrlib-<multiarch>/, .hostlib/, sparkctl-lib/   bare-library clusters only: link
//               farms bound over /usr/lib, the real /usr/lib they point into, and the node's
//               own /usr/local/lib/sparkctl
// Thread-safety: functions only; different nodes may be written from different threads.
#pragma once

#include <string>

#include "base/status.h"
#include "sparkctl/sim/cluster_state.h"

namespace spark::sim {

std::string NodeDir(const std::string& cluster_dir, const NodeState& node);

// /proc/meminfo of a GB10 (MemTotal ~121.7 GiB) with the given CmaTotal; CmaFree = CmaTotal.
std::string MeminfoText(long long cma_kib, long long mem_available_kib = kDefaultMemAvailableKib);
// /etc/security/limits.d entry for memlock ("unlimited" or KiB).
std::string LimitsText(const std::string& memlock);
// prlimit's --memlock argument: "unlimited:unlimited" or bytes. InvalidArgument for a bad value.
Result<std::string> MemlockPrlimitArg(const std::string& memlock);

// Writes every file of the node image (directories, facts, tools, sshd_config, setup.sh).
Status WriteNodeImage(const std::string& cluster_dir, const ClusterState& cluster,
                      const NodeState& node);

// Rewrites the fact files in place after a fault (their inodes are bind-mounted into the node).
Status WriteNodeFacts(const std::string& cluster_dir, const NodeState& node);

// The shell scripts (node_tools.cc). Each is a complete file.
std::string RefreshScript();
std::string NvidiaSmiScript(const NodeState& node);
std::string Ibdev2netdevScript();
std::string ShowGidsScript();
std::string UpdateGrubScript();
std::string DpkgQueryScript();
std::string AptMarkScript();
std::string DcbScript();
std::string UnameScript();
std::string GetconfScript();

// The emulated dpkg database of a node (/etc/sparksim/dpkg-status): the kernel packages of
// DGX OS for the allowed and the denied releases, and the meta packages, which depend on the
// default release's packages.
std::string DpkgStatusText();

}  // namespace spark::sim
