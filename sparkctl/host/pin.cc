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

std::string GrubDefaultFile(const std::string& release, const std::string& entry) {
  return "# Written by `sparkctl host pin`: boot the pinned kernel " + release + ".\n"
         "GRUB_DEFAULT=\"" + entry + "\"\n";
}

std::string RecordFile(const std::string& release, const std::vector<std::string>& held) {
  std::string out = "# Written by `sparkctl host pin`; `sparkctl host unpin` reverses it.\n"
                    "release " + release + "\nheld";
  for (const auto& p : held) out += " " + p;
  return out + "\n";
}

// The record's "release" and "held" lines; empty when there is no record.
std::pair<std::string, std::vector<std::string>> ParseRecord(const std::optional<std::string>& text) {
  std::pair<std::string, std::vector<std::string>> out;
  if (!text) return out;
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string key;
    words >> key;
    if (key == "release") words >> out.first;
    if (key == "held") {
      for (std::string p; words >> p;) out.second.push_back(p);
    }
  }
  return out;
}

std::optional<std::string> FileOf(const PinNodeInput& in, const std::string& path) {
  auto it = in.files.find(path);
  return it == in.files.end() ? std::nullopt : it->second;
}

// The quoted words of a grub.cfg menuentry/submenu line: the title and the $menuentry_id_option.
std::vector<std::string> Quoted(const std::string& line) {
  std::vector<std::string> out;
  for (size_t i = line.find('\''); i != std::string::npos; i = line.find('\'', i)) {
    size_t end = line.find('\'', i + 1);
    if (end == std::string::npos) break;
    out.push_back(line.substr(i + 1, end - i - 1));
    i = end + 1;
  }
  return out;
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
  return {kPinKernelPath,  kPinGrubPath,       kPinGrubDefaultPath, kPinLimitsPath,
          kPinSystemdPath, kPinOldSystemdPath, kPinRecordPath};
}

std::vector<std::string> KernelHoldPackages(const std::map<std::string, std::string>& packages,
                                            const std::string& release) {
  std::set<std::string> hold;
  const std::string suffix = "-" + release;
  for (const auto& [name, depends] : packages) {
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      hold.insert(name);
    }
  }
  // Meta packages: whatever depends on a held package, until nothing new is found.
  for (bool grew = !hold.empty(); grew;) {
    grew = false;
    for (const auto& [name, depends] : packages) {
      if (hold.count(name)) continue;
      std::string deps = depends;
      for (char& c : deps) c = (c == ',' || c == '|' || c == '(' || c == ')') ? ' ' : c;
      for (const auto& d : Tokens(deps)) {
        if (hold.count(d.substr(0, d.find(':')))) {
          hold.insert(name);
          grew = true;
          break;
        }
      }
    }
  }
  return {hold.begin(), hold.end()};
}

std::string GrubEntryFor(const std::string& grub_cfg, const std::string& release) {
  std::istringstream lines(grub_cfg);
  std::vector<std::string> submenus;  // ids of the submenus we are in ("" for a menuentry)
  for (std::string line; std::getline(lines, line);) {
    std::string t = line.substr(std::min(line.find_first_not_of(" \t"), line.size()));
    if (t.rfind("submenu ", 0) == 0 || t.rfind("menuentry ", 0) == 0) {
      std::vector<std::string> q = Quoted(t);
      const std::string id = q.size() >= 2 ? q.back() : "";
      // grub-mkconfig's 10_linux names the normal entry gnulinux-<release>-advanced-<uuid>.
      if (t.rfind("menuentry ", 0) == 0 &&
          id.rfind("gnulinux-" + release + "-advanced-", 0) == 0) {
        std::string path;
        for (const auto& s : submenus) {
          if (!s.empty()) path += s + ">";
        }
        return path + id;
      }
      submenus.push_back(t.rfind("submenu ", 0) == 0 ? id : "");
    } else if (t == "}" && !submenus.empty()) {
      submenus.pop_back();
    }
  }
  return "";
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
  const std::string pinned = ParseRecord(FileOf(input, kPinRecordPath)).first;
  if (plan.kernel_blocked.empty() && !pinned.empty() && pinned != input.kernel_release) {
    // The verification after a reboot: the node must have booted the kernel it was pinned to.
    plan.kernel_blocked = "booted kernel " + input.kernel_release + " but it is pinned to " +
                          pinned + ": the boot loader did not start the pinned kernel (check " +
                          std::string(kPinGrubDefaultPath) + " and " + kGrubCfgPath +
                          ", reboot), or `sparkctl host unpin` first to change kernels";
  }
  size_t before = plan.changes.size();
  if (plan.kernel_blocked.empty()) {
    const std::string& release = input.kernel_release;
    std::vector<std::string> hold = KernelHoldPackages(input.packages, release);
    if (!input.packages.count("linux-image-" + release)) {
      plan.problems.push_back("no installed package linux-image-" + release +
                              " (dpkg-query): the running kernel cannot be held with apt-mark; "
                              "install it from the DGX OS repository");
    }
    for (const auto& p : hold) {
      if (!Contains(input.held, p)) plan.hold.push_back(p);
    }
    plan.grub_default = GrubEntryFor(input.grub_cfg, release);
    if (plan.grub_default.empty()) {
      plan.problems.push_back(std::string(kGrubCfgPath) + " has no menu entry for " + release +
                              ": GRUB_DEFAULT cannot point at it (run update-grub, then pin "
                              "again)");
    }
    Want(input, kPinKernelPath, KernelPinFile(host, release), "hold kernel " + release, &plan);
    before = plan.changes.size();
    if (!plan.grub_default.empty()) {
      Want(input, kPinGrubDefaultPath, GrubDefaultFile(release, plan.grub_default),
           "boot " + release + " (GRUB_DEFAULT)", &plan);
    }
    Want(input, kPinRecordPath, RecordFile(release, hold), "record the pin", &plan);
  }
  std::optional<std::string> grub;
  if (!host.kernel_cmdline.empty()) grub = GrubFile(host.kernel_cmdline);
  Want(input, kPinGrubPath, grub,
       grub ? "kernel options" : "no kernel options asked: remove", &plan);
  for (const auto& c : plan.changes) {
    if (c.path == kPinGrubPath || c.path == kPinGrubDefaultPath) plan.run_update_grub = true;
  }
  Want(input, kPinLimitsPath, LimitsFile(memlock), "memlock " + memlock, &plan);
  before = plan.changes.size();
  if (input.systemd) {
    Want(input, kPinSystemdPath, SystemdDropIn(memlock), "memlock of the sparkctl-* units",
         &plan);
  }
  Want(input, kPinOldSystemdPath, std::nullopt, "drop-in for a unit nothing starts: remove",
       &plan);
  plan.reload_systemd = input.systemd && plan.changes.size() != before;
  std::vector<std::string> running = Tokens(input.proc_cmdline);
  for (const auto& o : host.kernel_cmdline) {
    if (!Contains(running, o)) plan.missing_cmdline.push_back(o);
  }
  return plan;
}

PinNodePlan PlanUnpin(const PinNodeInput& input) {
  PinNodePlan plan;
  plan.node = input.node;
  plan.kernel_release = input.kernel_release;
  for (const auto& path : PinManagedPaths()) {
    if (!FileOf(input, path)) continue;
    plan.changes.push_back({path, std::nullopt, "remove"});
    if (path == kPinGrubPath || path == kPinGrubDefaultPath) plan.run_update_grub = true;
    if (path == kPinSystemdPath || path == kPinOldSystemdPath) plan.reload_systemd = input.systemd;
  }
  for (const auto& p : ParseRecord(FileOf(input, kPinRecordPath)).second) {
    if (Contains(input.held, p)) plan.unhold.push_back(p);
  }
  return plan;
}

Result<PinNodeInput> ReadPinInput(ssh::Transport& transport, const std::string& node) {
  PinNodeInput in;
  in.node = node;
  // Three lines: release, kernel command line, whether systemd is the init system; then the
  // installed linux-* packages with their dependencies, and the held packages.
  const std::string probe =
      "cat /proc/sys/kernel/osrelease /proc/cmdline; "
      "if [ -d /run/systemd/system ]; then echo systemd; else echo none; fi; "
      "echo @@packages; dpkg-query -W -f='${db:Status-Abbrev}\\t${Package}\\t${Depends}\\n' "
      "'linux-*' 2>/dev/null; echo @@held; apt-mark showhold 2>/dev/null; echo @@end";
  SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r, ssh::RunChecked(transport, node, probe));
  std::istringstream lines(r.stdout_data);
  std::string init;
  if (!std::getline(lines, in.kernel_release) || !std::getline(lines, in.proc_cmdline) ||
      !std::getline(lines, init)) {
    return AbortedError(node + ": unexpected output of `" + probe + "`: " +
                        ssh::Tail(r.stdout_data));
  }
  in.systemd = init == "systemd";
  std::string section;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("@@", 0) == 0) {
      section = line.substr(2);
      continue;
    }
    if (section == "packages") {
      // "ii \tNAME\tDEPENDS": only installed packages ("ii").
      size_t a = line.find('\t'), b = a == std::string::npos ? a : line.find('\t', a + 1);
      if (b == std::string::npos || line.rfind("ii", 0) != 0) continue;
      in.packages[line.substr(a + 1, b - a - 1)] = line.substr(b + 1);
    } else if (section == "held" && !line.empty()) {
      in.held.push_back(line);
    }
  }
  auto grub = transport.ReadFile(node, kGrubCfgPath);
  if (grub.ok()) {
    in.grub_cfg = *grub;
  } else if (grub.status().code() != StatusCode::kNotFound) {
    return grub.status();
  }
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
  auto packages = [](const std::vector<std::string>& list) {
    std::string out;
    for (const auto& p : list) out += " " + ssh::ShellQuote(p);
    return out;
  };
  if (!plan.hold.empty()) {
    SPARK_RETURN_IF_ERROR(
        ssh::RunChecked(transport, node, "apt-mark hold" + packages(plan.hold)).status());
  }
  if (!plan.unhold.empty()) {
    SPARK_RETURN_IF_ERROR(
        ssh::RunChecked(transport, node, "apt-mark unhold" + packages(plan.unhold)).status());
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
