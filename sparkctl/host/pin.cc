#include "sparkctl/host/pin.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

namespace spark::host {
namespace {

// The packages that make up one kernel release on Ubuntu / DGX OS.
std::string KernelPackages(const std::string& release) {
  return "linux-image-" + release + " linux-modules-" + release + " linux-headers-" + release;
}

bool Contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// Kernel releases end up in APT package names: letters, digits, '.', '-', '+', '~' only.
bool IsPackageSafe(const std::string& s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' ||
           c == '~' || c == '_';
  });
}

// A kernel option goes inside a double-quoted shell assignment that GRUB sources.
bool IsCmdlineSafe(const std::string& s) {
  if (s.empty()) return false;
  return std::none_of(s.begin(), s.end(), [](char c) {
    return std::isspace(static_cast<unsigned char>(c)) || c == '"' || c == '\'' || c == '$' ||
           c == '\\' || c == '`' || static_cast<unsigned char>(c) < 0x20;
  });
}

// Empty when the running kernel may be held; otherwise what the node must boot first.
std::string KernelBlocked(const profile::HostSpec& host, const std::string& release) {
  for (const auto& d : host.kernel_deny) {
    if (d.release != release) continue;
    std::string msg = "kernel " + release + " is denied";
    if (!d.reason.empty()) msg += " (" + d.reason + ")";
    if (!host.kernel_allow.empty()) return msg + ": boot " + host.kernel_allow.front() + " first";
    return msg + (d.fix.empty() ? ": boot an allowed kernel first" : ": " + d.fix);
  }
  if (!host.kernel_allow.empty() && !Contains(host.kernel_allow, release)) {
    return "kernel " + release + " is not in the profile's allow list: boot " +
           host.kernel_allow.front() + " first";
  }
  return "";
}

std::string KernelPinFile(const profile::HostSpec& host, const std::string& release) {
  std::ostringstream out;
  out << "# Written by `sparkctl host pin`: holds the kernel the profile allows.\n"
      << "# Edit the profile and re-run instead of editing this file.\n\n"
      << "Package: " << KernelPackages(release) << "\n"
      << "Pin: version *\n"
      << "Pin-Priority: 1001\n";
  std::set<std::string> denied;
  for (const auto& d : host.kernel_deny) {
    if (d.release != release) denied.insert(d.release);
  }
  for (const auto& r : denied) {
    out << "\nPackage: " << KernelPackages(r) << "\n"
        << "Pin: version *\n"
        << "Pin-Priority: -1\n";
  }
  return out.str();
}

std::string GrubFile(const std::vector<std::string>& options) {
  std::string joined;
  for (const auto& o : options) joined += " " + o;
  return "# Written by `sparkctl host pin`: kernel options the profile asks for.\n"
         "GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT" +
         joined + "\"\n";
}

std::string LimitsFile(const std::string& memlock) {
  // pam_limits' "*" does not cover root, which the engine's service may run as.
  return "# Written by `sparkctl host pin`: RDMA registration (ibv_reg_mr) needs locked memory.\n"
         "* - memlock " + memlock + "\n"
         "root - memlock " + memlock + "\n";
}

std::string SystemdDropIn(const std::string& memlock) {
  std::string value = memlock == "unlimited" ? "infinity" : memlock + "K";
  return "# Written by `sparkctl host pin`: RDMA registration (ibv_reg_mr) needs locked memory.\n"
         "[Service]\nLimitMEMLOCK=" + value + "\n";
}

std::vector<std::string> Tokens(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

// Adds a change when `want` differs from what the node has.
void Want(const PinNodeInput& in, const std::string& path, std::optional<std::string> want,
          const std::string& why, PinNodePlan* plan) {
  auto it = in.files.find(path);
  std::optional<std::string> have = it == in.files.end() ? std::nullopt : it->second;
  if (have == want) return;
  plan->changes.push_back({path, std::move(want), why});
}

std::string ParentDir(const std::string& path) { return path.substr(0, path.rfind('/')); }

}  // namespace

std::vector<std::string> PinManagedPaths() {
  return {kPinKernelPath, kPinGrubPath, kPinLimitsPath, kPinSystemdPath};
}

Result<PinNodePlan> PlanPin(const profile::HostSpec& host, const PinNodeInput& input) {
  const std::string& node = input.node;
  if (!IsPackageSafe(input.kernel_release)) {
    return InvalidArgumentError(node + ": unexpected kernel release '" + input.kernel_release +
                                "'");
  }
  for (const auto& d : host.kernel_deny) {
    if (!IsPackageSafe(d.release)) {
      return InvalidArgumentError("host.kernel.deny: not a kernel release: '" + d.release + "'");
    }
  }
  for (const auto& o : host.kernel_cmdline) {
    if (!IsCmdlineSafe(o)) {
      return InvalidArgumentError("host.kernel.cmdline: option '" + o +
                                  "' must not contain spaces, quotes, '$', '`' or '\\'");
    }
  }
  const std::string& memlock = host.memlock;
  bool memlock_ok = memlock == "unlimited" ||
                    (!memlock.empty() && std::all_of(memlock.begin(), memlock.end(), [](char c) {
                      return std::isdigit(static_cast<unsigned char>(c)) != 0;
                    }));
  if (!memlock_ok) {
    return InvalidArgumentError("host.memlock: '" + memlock + "' is neither unlimited nor KiB");
  }

  PinNodePlan plan;
  plan.node = node;
  plan.kernel_release = input.kernel_release;
  plan.kernel_blocked = KernelBlocked(host, input.kernel_release);
  if (plan.kernel_blocked.empty()) {
    Want(input, kPinKernelPath, KernelPinFile(host, input.kernel_release),
         "hold kernel " + input.kernel_release, &plan);
  }
  std::optional<std::string> grub;
  if (!host.kernel_cmdline.empty()) grub = GrubFile(host.kernel_cmdline);
  size_t before = plan.changes.size();
  Want(input, kPinGrubPath, grub,
       grub ? "kernel options" : "no kernel options asked: remove", &plan);
  plan.run_update_grub = plan.changes.size() != before;
  Want(input, kPinLimitsPath, LimitsFile(memlock), "memlock " + memlock, &plan);
  if (input.systemd) {
    before = plan.changes.size();
    Want(input, kPinSystemdPath, SystemdDropIn(memlock), "engine service memlock", &plan);
    plan.reload_systemd = plan.changes.size() != before;
  }
  std::vector<std::string> running = Tokens(input.proc_cmdline);
  for (const auto& o : host.kernel_cmdline) {
    if (!Contains(running, o)) plan.missing_cmdline.push_back(o);
  }
  return plan;
}

Result<PinNodeInput> ReadPinInput(ssh::Transport& transport, const std::string& node) {
  PinNodeInput in;
  in.node = node;
  // Three lines: release, kernel command line, whether systemd is the init system.
  const std::string probe =
      "cat /proc/sys/kernel/osrelease /proc/cmdline; "
      "if [ -d /run/systemd/system ]; then echo systemd; else echo none; fi";
  SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r, ssh::RunChecked(transport, node, probe));
  std::istringstream lines(r.stdout_data);
  std::string init;
  if (!std::getline(lines, in.kernel_release) || !std::getline(lines, in.proc_cmdline) ||
      !std::getline(lines, init)) {
    return AbortedError(node + ": unexpected output of `" + probe + "`: " +
                        ssh::Tail(r.stdout_data));
  }
  in.systemd = init == "systemd";
  for (const auto& path : PinManagedPaths()) {
    auto contents = transport.ReadFile(node, path);
    if (contents.ok()) {
      in.files[path] = *contents;
    } else if (contents.status().code() == StatusCode::kNotFound) {
      in.files[path] = std::nullopt;
    } else {
      return contents.status();
    }
  }
  return in;
}

Status ApplyPin(ssh::Transport& transport, const PinNodePlan& plan) {
  const std::string& node = plan.node;
  std::set<std::string> dirs;
  for (const auto& c : plan.changes) {
    if (c.contents) dirs.insert(ParentDir(c.path));
  }
  if (!dirs.empty()) {
    std::string mkdir = "mkdir -p";
    for (const auto& d : dirs) mkdir += " " + ssh::ShellQuote(d);
    SPARK_RETURN_IF_ERROR(ssh::RunChecked(transport, node, mkdir).status());
  }
  for (const auto& c : plan.changes) {
    if (c.contents) {
      SPARK_RETURN_IF_ERROR(transport.WriteFile(node, c.path, *c.contents, 0644));
    } else {
      SPARK_RETURN_IF_ERROR(
          ssh::RunChecked(transport, node, "rm -f " + ssh::ShellQuote(c.path)).status());
    }
  }
  if (plan.run_update_grub) {
    SPARK_RETURN_IF_ERROR(ssh::RunChecked(transport, node, "update-grub").status());
  }
  if (plan.reload_systemd) {
    SPARK_RETURN_IF_ERROR(ssh::RunChecked(transport, node, "systemctl daemon-reload").status());
  }
  return Status();
}

}  // namespace spark::host
