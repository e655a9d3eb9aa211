// `sparkctl host pin`: hold each node on the kernel the profile allows and make the host settings
// the engine needs persistent (docs/preflight.md, "host pin"):
//   - an APT preferences file that pins the running kernel's packages and gives the denied
//     releases Pin-Priority -1 (node-local; dpkg state is never touched, no apt-mark);
//   - a GRUB drop-in adding the profile's kernel options (e.g. kho=off), then update-grub;
//   - a limits.d file and, where systemd runs, a drop-in for the engine's service, raising the
//     locked-memory limit (ibv_reg_mr fails with ENOMEM below it).
//
// Planning is a pure function of the profile and what was read from the node (PlanPin), so it is
// tested without nodes; ReadPinInput and ApplyPin are the only parts that touch a Transport.
// Applying writes only files that differ, so a second run plans 0 changes. Nothing reboots.
// Thread-safety: all functions are reentrant; ReadPinInput/ApplyPin for different nodes may run
// concurrently on a thread-safe Transport.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "sparkctl/profile/profile.h"
#include "sparkctl/ssh/transport.h"

namespace spark::host {

inline constexpr char kPinKernelPath[] = "/etc/apt/preferences.d/sparkctl-kernel";
inline constexpr char kPinGrubPath[] = "/etc/default/grub.d/99-sparkctl.cfg";
inline constexpr char kPinLimitsPath[] = "/etc/security/limits.d/99-sparkctl-memlock.conf";
inline constexpr char kPinSystemdPath[] =
    "/etc/systemd/system/sparkctl-engine@.service.d/memlock.conf";

// What PlanPin needs to know about one node.
struct PinNodeInput {
  std::string node;
  std::string kernel_release;  // /proc/sys/kernel/osrelease, e.g. "6.17.0-1031-nvidia"
  std::string proc_cmdline;    // /proc/cmdline of the running kernel
  bool systemd = false;        // /run/systemd/system exists
  // Current contents of the files pin manages (PinManagedPaths); a path missing here, or
  // mapped to nullopt, is absent on the node.
  std::map<std::string, std::optional<std::string>> files;
};

// One file to bring to its wanted state. `contents` nullopt: remove the file.
struct PinFileChange {
  std::string path;
  std::optional<std::string> contents;
  std::string why;  // one line for the plan table
};

struct PinNodePlan {
  std::string node;
  std::string kernel_release;
  // Non-empty when the running kernel is not allowed: which kernel the node must boot first.
  // The kernel pin is then left as it is (the other settings are still planned).
  std::string kernel_blocked;
  std::vector<PinFileChange> changes;      // only files whose contents differ
  bool run_update_grub = false;            // the GRUB drop-in changes
  bool reload_systemd = false;             // the service drop-in changes and systemd runs
  std::vector<std::string> missing_cmdline;  // profile options absent from /proc/cmdline

  // The running kernel lacks a kernel option the profile asks for.
  bool NeedsReboot() const { return !missing_cmdline.empty(); }
};

// The files PlanPin compares (read them all into PinNodeInput::files).
std::vector<std::string> PinManagedPaths();

// The wanted state of one node. InvalidArgument when the profile's kernel options or memlock
// value cannot be written safely (quotes, spaces, "$", a memlock that is neither "unlimited"
// nor a number of KiB). Pure: no I/O.
Result<PinNodePlan> PlanPin(const profile::HostSpec& host, const PinNodeInput& input);

// Reads the running kernel, /proc/cmdline, whether systemd runs and the managed files.
// Returns the errors of Transport::Run/ReadFile (NotFound of a file counts as absent), Aborted
// when the probe command fails. Errors name the node.
Result<PinNodeInput> ReadPinInput(ssh::Transport& transport, const std::string& node);

// Creates the parent directories, writes (atomically) or removes the changed files, runs
// update-grub when the GRUB drop-in changed and `systemctl daemon-reload` when the service
// drop-in changed. Never reboots. Returns the first failure (Aborted for a failed command, or
// the Transport's errors), naming the node.
Status ApplyPin(ssh::Transport& transport, const PinNodePlan& plan);

}  // namespace spark::host
