// `sparkctl host pin`: hold each node on the kernel the profile allows and make the host settings
// the engine needs persistent (docs/preflight.md, "host pin"):
//   - the kernel: `apt-mark hold` of the running kernel's packages and of the meta packages that
//     would pull a newer one (linux-image-nvidia, ...), an APT preferences file that pins them
//     and gives the denied releases Pin-Priority -1, and GRUB_DEFAULT set to the running
//     kernel's menu entry (read from /boot/grub/grub.cfg), so the next boot starts it;
//   - a record of the pin (/etc/sparkctl/host/pin): the release and the packages held. Every
//     later plan compares the booted kernel with it, so a node that came back from a reboot on
//     another kernel is reported (kernel_blocked), not silently accepted;
//   - GRUB drop-ins with GRUB_DEFAULT (99-sparkctl-default.cfg) and the profile's kernel options
//     (99-sparkctl.cfg, e.g. kho=off), then update-grub;
//   - a limits.d file and, where systemd runs, a drop-in for every `sparkctl-*.service` unit
//     (the rank units `up` starts are sparkctl-<cluster>-rank<R>), raising the locked-memory
//     limit (ibv_reg_mr fails with ENOMEM below it).
// `sparkctl host unpin` (PlanUnpin) removes all of it and unholds the recorded packages.
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
inline constexpr char kPinGrubDefaultPath[] = "/etc/default/grub.d/99-sparkctl-default.cfg";
inline constexpr char kPinLimitsPath[] = "/etc/security/limits.d/99-sparkctl-memlock.conf";
// A "sparkctl-.service.d" drop-in applies to every unit named sparkctl-*.service (systemd's
// prefix drop-ins), which covers the transient rank units of `up` (up/launch_plan.h).
inline constexpr char kPinSystemdPath[] = "/etc/systemd/system/sparkctl-.service.d/memlock.conf";
// Where releases before this one put the drop-in: a unit nothing starts. Removed by pin.
inline constexpr char kPinOldSystemdPath[] =
    "/etc/systemd/system/sparkctl-engine@.service.d/memlock.conf";
inline constexpr char kPinRecordPath[] = "/etc/sparkctl/host/pin";
inline constexpr char kGrubCfgPath[] = "/boot/grub/grub.cfg";

// What PlanPin needs to know about one node.
struct PinNodeInput {
  std::string node;
  std::string kernel_release;  // /proc/sys/kernel/osrelease, e.g. "6.17.0-1031-nvidia"
  std::string proc_cmdline;    // /proc/cmdline of the running kernel
  bool systemd = false;        // /run/systemd/system exists
  // Current contents of the files pin manages (PinManagedPaths); a path missing here, or
  // mapped to nullopt, is absent on the node.
  std::map<std::string, std::optional<std::string>> files;
  // Installed packages named linux-*: name -> its Depends field (dpkg-query).
  std::map<std::string, std::string> packages;
  std::vector<std::string> held;  // `apt-mark showhold`
  std::string grub_cfg;           // /boot/grub/grub.cfg, "" when absent
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
  std::vector<std::string> hold;           // packages to `apt-mark hold` (not held yet)
  std::vector<std::string> unhold;         // packages to `apt-mark unhold` (unpin)
  std::string grub_default;                // the running kernel's GRUB entry ("id>id")
  // What pin cannot do on this node (no GRUB entry, kernel not installed by APT): `host pin`
  // refuses to apply, `up` warns.
  std::vector<std::string> problems;
  bool run_update_grub = false;            // a GRUB drop-in changes
  bool reload_systemd = false;             // the service drop-in changes and systemd runs
  std::vector<std::string> missing_cmdline;  // profile options absent from /proc/cmdline

  // The running kernel lacks a kernel option the profile asks for.
  bool NeedsReboot() const { return !missing_cmdline.empty(); }
};

// The files PlanPin compares (read them all into PinNodeInput::files).
std::vector<std::string> PinManagedPaths();

// The wanted state of one node. InvalidArgument when the profile's kernel options or memlock
// value cannot be written safely (quotes, spaces, "$", a memlock that is neither "unlimited"
// nor a number of KiB); FailedPrecondition naming the node and file when the running kernel
// has no entry in /boot/grub/grub.cfg or no installed linux-image package. Pure: no I/O.
Result<PinNodePlan> PlanPin(const profile::HostSpec& host, const PinNodeInput& input);

// What `host unpin` does on one node: remove every file pin wrote, unhold the packages the
// record lists, update-grub and daemon-reload where those files existed. Pure.
PinNodePlan PlanUnpin(const PinNodeInput& input);

// Pure parts, exposed for tests.
// The packages that hold `release`: its own (linux-*-<release>) and, transitively, the
// installed linux-* packages that depend on them (the meta packages), sorted.
std::vector<std::string> KernelHoldPackages(const std::map<std::string, std::string>& packages,
                                            const std::string& release);
// "<submenu id>><entry id>" (or "<entry id>" at the top level) of the normal (not recovery)
// entry of `release` in a grub.cfg (id gnulinux-<release>-advanced-<uuid>); "" when none.
std::string GrubEntryFor(const std::string& grub_cfg, const std::string& release);

// Reads the running kernel, /proc/cmdline, whether systemd runs and the managed files.
// Returns the errors of Transport::Run/ReadFile (NotFound of a file counts as absent), Aborted
// when the probe command fails. Errors name the node.
Result<PinNodeInput> ReadPinInput(ssh::Transport& transport, const std::string& node);

// Creates the parent directories, writes (atomically) or removes the changed files, runs
// `apt-mark hold`/`unhold` for the plan's packages, update-grub when the GRUB drop-in changed
// and `systemctl daemon-reload` when the service drop-in changed. Never reboots. Returns the first failure (Aborted for a failed command, or
// the Transport's errors), naming the node.
Status ApplyPin(ssh::Transport& transport, const PinNodePlan& plan);

}  // namespace spark::host
