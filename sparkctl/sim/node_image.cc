#include "sparkctl/sim/node_image.h"

#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/strings.h"
#include "sparkctl/sim/cabling_plan.h"

namespace spark::sim {
namespace {

namespace fs = std::filesystem;

constexpr long long kMemTotalKib = 127601864;  // ~121.7 GiB usable of 128 GB

// The host's multiarch library folder (below /usr/lib).
#if defined(__aarch64__)
constexpr char kHostMultiarch[] = "aarch64-linux-gnu";
#else
constexpr char kHostMultiarch[] = "x86_64-linux-gnu";
#endif

Status MakeDirs(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return InternalError("cannot create " + path + ": " + ec.message());
  return Status::Ok();
}

std::string DgxReleaseText(const ClusterState& cluster, const NodeState& node) {
  return fmt::format(
      "DGX_NAME=\"DGX Spark\"\n"
      "DGX_PRETTY_NAME=\"NVIDIA DGX Spark\"\n"
      "DGX_SWBUILD_DATE=\"2025-10-20-10-00-00\"\n"
      "DGX_SWBUILD_VERSION=\"7.3.1\"\n"
      "DGX_COMMIT_ID=\"0000000\"\n"
      "DGX_PLATFORM=\"DGX Spark\"\n"
      "DGX_SERIAL_NUMBER=\"SIM{:03d}{:02d}\"\n",
      cluster.slot, node.rank);
}

std::string SshdConfig(const std::string& cluster_dir, const std::string& dir) {
  return fmt::format(
      "# sshd of a simulated Spark; runs in the node's network, UTS and mount namespaces.\n"
      "Port 22\n"
      "HostKey {1}/ssh/ssh_host_ed25519_key\n"
      "PidFile {1}/sshd.pid\n"
      "AuthorizedKeysFile {0}/authorized_keys\n"
      "PermitRootLogin prohibit-password\n"
      "PasswordAuthentication no\n"
      "KbdInteractiveAuthentication no\n"
      "UsePAM no\n"
      "StrictModes no\n"
      "UseDNS no\n"
      "PrintMotd no\n"
      "PrintLastLog no\n"
      "MaxStartups 64:30:128\n"
      "MaxSessions 64\n"
      "AcceptEnv LANG LC_*\n"
      "Subsystem sftp /usr/lib/openssh/sftp-server\n",
      cluster_dir, dir);
}

// DGX OS 7's /etc/os-release (Ubuntu 24.04); the node's overlay shows it instead of the host's.
constexpr char kOsRelease[] =
    "PRETTY_NAME=\"Ubuntu 24.04.3 LTS\"\nNAME=\"Ubuntu\"\nVERSION_ID=\"24.04\"\n"
    "VERSION=\"24.04.3 LTS (Noble Numbat)\"\nVERSION_CODENAME=noble\nID=ubuntu\nID_LIKE=debian\n"
    "UBUNTU_CODENAME=noble\n";

// The host's build libraries a fresh DGX OS lacks (prefixes of file names in /usr/lib and its
// multiarch folder): what sparkctl's bundles must carry. Bare-library nodes do not see them.
constexpr const char* kHiddenLibraries[] = {"libssh.so",   "libssh_threads.so", "libyaml-cpp.so",
                                            "libspdlog.so", "libfmt.so",         "libgloo.so",
                                            "libhiredis.so", "libicu"};

bool Hidden(const std::string& name) {
  for (const char* prefix : kHiddenLibraries) {
    if (name.starts_with(prefix)) return true;
  }
  return false;
}

// `farm`: a symlink to `target/<name>` for every entry of `real` that is not hidden, except
// `nested` (a name -> folder of its own farm).
Status WriteLinkFarm(const std::string& real, const std::string& target, const std::string& farm,
                     const std::map<std::string, std::string>& nested) {
  SPARK_RETURN_IF_ERROR(MakeDirs(farm));
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(real, ec)) {
    const std::string name = e.path().filename().string();
    if (Hidden(name)) continue;
    auto it = nested.find(name);
    fs::create_symlink(it != nested.end() ? it->second : target + "/" + name, farm + "/" + name,
                       ec);
    if (ec) return InternalError("cannot link " + farm + "/" + name + ": " + ec.message());
  }
  if (ec) return InternalError("cannot list " + real + ": " + ec.message());
  return Status::Ok();
}

// The bare-library view of /usr/lib: links into the real /usr/lib (bound at <node>/.hostlib
// inside the node) for everything but the hidden libraries, in /usr/lib and in its multiarch
// folder (which becomes a farm of its own).
Status WriteBareLibraries(const std::string& dir) {
  const std::string triplet = std::string(kHostMultiarch);
  SPARK_RETURN_IF_ERROR(MakeDirs(dir + "/.hostlib"));
  SPARK_RETURN_IF_ERROR(MakeDirs(dir + "/sparkctl-lib"));
  SPARK_RETURN_IF_ERROR(WriteLinkFarm("/usr/lib/" + triplet, dir + "/.hostlib/" + triplet,
                                      dir + "/usrlib-" + triplet, {}));
  return WriteLinkFarm("/usr/lib", dir + "/.hostlib", dir + "/usrlib",
                       {{triplet, dir + "/usrlib-" + triplet}});
}

// Runs once as `ip netns exec NS unshare --uts --mount --propagation private sh setup.sh`, then
// stays as the holder of the node's mount and UTS namespaces (`sleep infinity`).
std::string SetupScript(const std::string& cluster_dir, const std::string& dir,
                        const NodeState& node, bool bare_libs) {
  // After /run is private again (the cluster folder is bound back without submounts).
  const std::string bare =
      bare_libs ? "mount --bind /usr/lib \"$N/.hostlib\"\n"
                  "mount --bind \"$N/usrlib\" /usr/lib\n"
                  "mkdir -p /usr/local/lib/sparkctl\n"
                  "mount --bind \"$N/sparkctl-lib\" /usr/local/lib/sparkctl\n"
                : "";
  return fmt::format(
      R"(#!/bin/sh
# Setup of simulated Spark {2}: hostname, emulated files, private /run; then holds the namespaces.
set -e
C='{0}'
N='{1}'
exec 2>>"$N/log/setup.log"
hostname {2}
mount --bind "$N/proc/osrelease" /proc/sys/kernel/osrelease
mount --bind "$N/proc/meminfo" /proc/meminfo
mount -t overlay sparksim-etc -o "lowerdir=/etc,upperdir=$N/etc,workdir=$N/.etc-work" /etc
mount --bind "$N/bin" /usr/local/bin
mount -t tmpfs -o mode=0755 sparksim-sys "$N/.sysclass"
mkdir "$N/.sysclass/net" "$N/.sysclass/.net" "$N/.sysclass/infiniband"
mount --bind /sys/class/net "$N/.sysclass/.net"
mount --bind "$N/infiniband" "$N/.sysclass/infiniband"
mount --move "$N/.sysclass" /sys/class
if [ -d /boot ]; then
  mount --bind "$N/boot" /boot
  /usr/local/bin/update-grub 2>/dev/null
fi
cd "$C"
mount -t tmpfs -o mode=0755 sparksim-run /run
mkdir -p /run/sshd "$C"
mount --no-canonicalize --bind . "$C"
cd /
{3}/usr/local/bin/sparksim-refresh
setsid /bin/bash -c 'ip monitor link address | while read -r _; do
  while read -r -t 0.05 _; do :; done; /usr/local/bin/sparksim-refresh; done' \
  </dev/null >/dev/null 2>&1 &
echo "ready $$"
exec sleep infinity </dev/null >/dev/null 2>&1
)",
      cluster_dir, dir, node.name, bare);
}

// The static part of the RDMA tree; sparksim-refresh fills in state, MTU and GIDs.
Status WriteInfinibandSkeleton(const std::string& dir, const NodeState& node) {
  for (int p = 0; p < kPorts; ++p) {
    for (int t = 0; t < kTwins; ++t) {
      std::string dev = dir + "/infiniband/" + std::string(RdmaDevice(p, t));
      std::string port = dev + "/ports/1";
      for (const char* sub : {"/gids", "/gid_attrs/types", "/gid_attrs/ndevs"})
        SPARK_RETURN_IF_ERROR(MakeDirs(port + sub));
      SPARK_RETURN_IF_ERROR(MakeDirs(dev + "/device/net"));
      std::error_code ec;
      std::string netdev(FabricNetdev(p, t));
      fs::create_symlink("/sys/class/net/" + netdev, dev + "/device/net/" + netdev, ec);
      std::string guid = fmt::format("025c:{:02x}ff:fe{:02x}:{:02x}{:02x}", node.rank, p, t,
                                     node.rank);
      std::vector<std::pair<std::string, std::string>> files = {
          {dev + "/node_type", "1: CA"},          {dev + "/hca_type", "MT4129"},
          {dev + "/fw_ver", "28.45.1200"},        {dev + "/board_id", "NVD0000000087"},
          {dev + "/node_guid", guid},             {port + "/link_layer", "Ethernet"},
          {port + "/rate", "100 Gb/sec (2X NDR)"}, {port + "/state", "1: DOWN"},
          {port + "/phys_state", "3: Disabled"},  {port + "/active_mtu", "1024 (3)"}};
      for (const auto& [path, text] : files)
        SPARK_RETURN_IF_ERROR(WriteFileAtomic(path, text + "\n"));
    }
  }
  return Status::Ok();
}

Status WriteTools(const std::string& dir, const NodeState& node) {
  std::vector<std::pair<std::string, std::string>> tools = {
      {"sparksim-refresh", RefreshScript()}, {"nvidia-smi", NvidiaSmiScript(node)},
      {"ibdev2netdev", Ibdev2netdevScript()}, {"show_gids", ShowGidsScript()},
      {"update-grub", UpdateGrubScript()},   {"uname", UnameScript()},
      {"dpkg-query", DpkgQueryScript()},     {"apt-mark", AptMarkScript()},
      {"dcb", DcbScript()},                  {"getconf", GetconfScript()}};
  for (const auto& [name, text] : tools)
    SPARK_RETURN_IF_ERROR(WriteFileAtomic(dir + "/bin/" + name, text, 0755));
  return Status::Ok();
}

}  // namespace

std::string DpkgStatusText() {
  std::string out;
  auto row = [&out](const std::string& name, const std::string& depends) {
    out += "ii \t" + name + "\t" + depends + "\n";
  };
  for (const char* r : {"6.17.0-1031-nvidia", "6.17.0-1032-nvidia", "7.0.0-1019-nvidia"}) {
    const std::string release = r;
    row("linux-image-" + release, "linux-modules-" + release);
    row("linux-modules-" + release, "");
    row("linux-headers-" + release, "linux-nvidia-headers-" + release.substr(0, release.rfind('-')));
  }
  row("linux-image-nvidia", "linux-image-6.17.0-1031-nvidia");
  row("linux-headers-nvidia", "linux-headers-6.17.0-1031-nvidia");
  row("linux-nvidia", "linux-image-nvidia (= 6.17.0.1031.31), linux-headers-nvidia");
  row("linux-firmware", "");
  return out;
}

std::string NodeDir(const std::string& cluster_dir, const NodeState& node) {
  return cluster_dir + "/nodes/" + node.name;
}

std::string MeminfoText(long long cma_kib, long long mem_available_kib) {
  // MemFree follows MemAvailable (an idle Spark's gap between them) when a fault shrinks it.
  const long long free_kib = std::max(0LL, mem_available_kib - (123894660 - 119478212));
  const std::vector<std::pair<std::string, long long>> rows = {
      {"MemTotal", kMemTotalKib}, {"MemFree", free_kib}, {"MemAvailable", mem_available_kib},
      {"Buffers", 212480},        {"Cached", 3981256},    {"SwapCached", 0},
      {"Active", 2471020},        {"Inactive", 2905524},  {"Active(anon)", 1297812},
      {"Inactive(anon)", 0},      {"Active(file)", 1173208}, {"Inactive(file)", 2905524},
      {"Unevictable", 30720},     {"Mlocked", 27648},     {"SwapTotal", 16777212},
      {"SwapFree", 16777212},     {"Dirty", 312},         {"Writeback", 0},
      {"AnonPages", 1214224},     {"Mapped", 604176},     {"Shmem", 113908},
      {"KReclaimable", 236452},   {"Slab", 538152},       {"SReclaimable", 236452},
      {"SUnreclaim", 301700},     {"KernelStack", 22016}, {"PageTables", 28192},
      {"SecPageTables", 0},       {"NFS_Unstable", 0},    {"Bounce", 0},
      {"WritebackTmp", 0},        {"CommitLimit", 80578144}, {"Committed_AS", 6217860},
      {"VmallocTotal", 133141626880}, {"VmallocUsed", 95744}, {"VmallocChunk", 0},
      {"Percpu", 12800},          {"HardwareCorrupted", 0}, {"AnonHugePages", 436224},
      {"ShmemHugePages", 0},      {"ShmemPmdMapped", 0},  {"FileHugePages", 0},
      {"FilePmdMapped", 0},       {"CmaTotal", cma_kib},  {"CmaFree", cma_kib}};
  std::string out;
  for (const auto& [key, kib] : rows) out += fmt::format("{:<16}{:>8} kB\n", key + ":", kib);
  out +=
      "HugePages_Total:       0\nHugePages_Free:        0\nHugePages_Rsvd:        0\n"
      "HugePages_Surp:        0\nHugepagesize:       2048 kB\nHugetlb:               0 kB\n";
  return out;
}

std::string LimitsText(const std::string& memlock) {
  return "# Written by sparkctl sim: the node's locked-memory limit (KiB or unlimited).\n"
         "*    soft memlock " + memlock + "\n*    hard memlock " + memlock +
         "\nroot soft memlock " + memlock + "\nroot hard memlock " + memlock + "\n";
}

Result<std::string> MemlockPrlimitArg(const std::string& memlock) {
  if (memlock == "unlimited") return std::string("unlimited:unlimited");
  std::optional<int64_t> kib = ParseInt(memlock);
  if (!kib || *kib < 0)
    return InvalidArgumentError("memlock '" + memlock +
                                "' is neither 'unlimited' nor a size in KiB (e.g. 8192)");
  std::string bytes = std::to_string(*kib * 1024);
  return bytes + ":" + bytes;
}

Status WriteNodeImage(const std::string& cluster_dir, const ClusterState& cluster,
                      const NodeState& node) {
  const std::string dir = NodeDir(cluster_dir, node);
  for (const char* sub : {"/etc/security/limits.d", "/etc/sparksim", "/.etc-work", "/proc",
                          "/bin", "/ssh", "/log", "/.sysclass", "/infiniband", "/boot"})
    SPARK_RETURN_IF_ERROR(MakeDirs(dir + sub));
  SPARK_RETURN_IF_ERROR(WriteFileAtomic(dir + "/etc/hostname", node.name + "\n"));
  SPARK_RETURN_IF_ERROR(WriteFileAtomic(
      dir + "/etc/hosts", "127.0.0.1\tlocalhost\n127.0.1.1\t" + node.name + "\n"));
  SPARK_RETURN_IF_ERROR(WriteFileAtomic(dir + "/etc/dgx-release", DgxReleaseText(cluster, node)));
  SPARK_RETURN_IF_ERROR(WriteFileAtomic(dir + "/etc/os-release", kOsRelease));
  if (cluster.bare_libs) SPARK_RETURN_IF_ERROR(WriteBareLibraries(dir));
  SPARK_RETURN_IF_ERROR(WriteFileAtomic(dir + "/etc/sparksim/dpkg-status", DpkgStatusText()));
  SPARK_RETURN_IF_ERROR(WriteNodeFacts(cluster_dir, node));
  SPARK_RETURN_IF_ERROR(WriteInfinibandSkeleton(dir, node));
  SPARK_RETURN_IF_ERROR(WriteTools(dir, node));
  SPARK_RETURN_IF_ERROR(WriteFileAtomic(dir + "/ssh/sshd_config", SshdConfig(cluster_dir, dir)));
  return WriteFileAtomic(dir + "/setup.sh", SetupScript(cluster_dir, dir, node, cluster.bare_libs),
                         0755);
}

Status WriteNodeFacts(const std::string& cluster_dir, const NodeState& node) {
  const std::string dir = NodeDir(cluster_dir, node);
  SPARK_RETURN_IF_ERROR(
      WriteFileInPlace(dir + "/proc/osrelease", node.facts.kernel_release + "\n"));
  SPARK_RETURN_IF_ERROR(WriteFileInPlace(dir + "/proc/meminfo", MeminfoText(node.facts.cma_kib,
                                                                  node.facts.mem_available_kib)));
  SPARK_RETURN_IF_ERROR(WriteFileInPlace(dir + "/etc/machine-id", node.facts.machine_id + "\n"));
  // Empty: the stand-ins report the host's own values.
  SPARK_RETURN_IF_ERROR(WriteFileInPlace(dir + "/etc/sparksim/machine", node.facts.machine + "\n"));
  SPARK_RETURN_IF_ERROR(WriteFileInPlace(dir + "/etc/sparksim/glibc", node.facts.glibc + "\n"));
  return WriteFileInPlace(dir + "/etc/security/limits.d/90-sparkctl-sim.conf",
                          LimitsText(node.facts.memlock));
}

}  // namespace spark::sim
