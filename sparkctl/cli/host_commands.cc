// `sparkctl host pin`: hold the allowed kernel, add the profile's kernel options and raise the
// memlock limit on every node (docs/preflight.md, "host pin"); `sparkctl host unpin` takes all
// of it off again. Plans first, asks, never reboots.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "sparkctl/cli/families.h"
#include "sparkctl/host/pin.h"
#include "sparkctl/host/remote.h"
#include "sparkctl/inventory/cluster_yaml.h"
#include "sparkctl/profile/profile_yaml.h"
#include "sparkctl/ssh/parallel.h"

namespace spark::cli {
namespace {

using nlohmann::ordered_json;

struct PinOptions {
  std::string cluster_file = "cluster.yaml";
  std::string profile_file;  // empty: the default host settings (memlock unlimited, any kernel)
  bool json = false;
  bool yes = false;
  bool plan_only = false;
  bool accept_new = false;
  bool unpin = false;  // `host unpin`
};

size_t CountChanges(const std::vector<host::PinNodePlan>& plans) {
  size_t n = 0;
  for (const auto& p : plans) {
    n += p.changes.size() + p.run_update_grub + p.reload_systemd + !p.hold.empty() +
         !p.unhold.empty();
  }
  return n;
}

void PrintPlan(const std::vector<host::PinNodePlan>& plans) {
  for (const auto& p : plans) {
    std::printf("%s  kernel %s\n", p.node.c_str(), p.kernel_release.c_str());
    if (!p.kernel_blocked.empty()) std::printf("  NOT PINNED: %s\n", p.kernel_blocked.c_str());
    for (const auto& problem : p.problems) std::printf("  CANNOT PIN: %s\n", problem.c_str());
    for (const auto& c : p.changes) {
      std::printf("  %-6s %-62s %s\n", c.contents ? "write" : "remove", c.path.c_str(),
                  c.why.c_str());
    }
    std::string hold, unhold;
    for (const auto& x : p.hold) hold += " " + x;
    for (const auto& x : p.unhold) unhold += " " + x;
    if (!hold.empty()) std::printf("  run    apt-mark hold%s\n", hold.c_str());
    if (!unhold.empty()) std::printf("  run    apt-mark unhold%s\n", unhold.c_str());
    if (!p.grub_default.empty()) std::printf("  boot   GRUB_DEFAULT=\"%s\"\n", p.grub_default.c_str());
    if (p.run_update_grub) std::printf("  run    update-grub\n");
    if (p.reload_systemd) std::printf("  run    systemctl daemon-reload\n");
    if (p.changes.empty() && p.hold.empty() && p.unhold.empty()) std::printf("  (up to date)\n");
  }
  std::printf("%zu change(s)\n", CountChanges(plans));
}

void PrintReboots(const std::vector<host::PinNodePlan>& plans) {
  for (const auto& p : plans) {
    if (!p.NeedsReboot()) continue;
    std::string opts;
    for (const auto& o : p.missing_cmdline) opts += (opts.empty() ? "" : " ") + o;
    std::printf("reboot needed: %s (/proc/cmdline lacks %s)\n", p.node.c_str(), opts.c_str());
  }
}

ordered_json PlanJson(const std::vector<host::PinNodePlan>& plans,
                      const std::vector<Status>* applied) {
  ordered_json nodes = ordered_json::array();
  ordered_json reboot = ordered_json::array();
  for (size_t i = 0; i < plans.size(); ++i) {
    const auto& p = plans[i];
    ordered_json changes = ordered_json::array();
    for (const auto& c : p.changes) {
      changes.push_back(
          {{"path", c.path}, {"action", c.contents ? "write" : "remove"}, {"why", c.why}});
    }
    ordered_json n = {{"node", p.node},
                      {"kernel", p.kernel_release},
                      {"kernel_blocked", p.kernel_blocked},
                      {"changes", changes},
                      {"hold", p.hold},
                      {"unhold", p.unhold},
                      {"grub_default", p.grub_default},
                      {"problems", p.problems},
                      {"update_grub", p.run_update_grub},
                      {"reload_systemd", p.reload_systemd},
                      {"needs_reboot", p.NeedsReboot()},
                      {"missing_cmdline", p.missing_cmdline}};
    if (applied) n["error"] = (*applied)[i].ok() ? "" : (*applied)[i].message();
    nodes.push_back(n);
    if (p.NeedsReboot()) reboot.push_back(p.node);
  }
  return {{"schema", "sparkctl-host-pin/v1"}, {"applied", applied != nullptr},
          {"changes", CountChanges(plans)}, {"nodes", nodes}, {"reboot", reboot}};
}

// Reads every node and plans it. Fails when any node cannot be read or planned.
Result<std::vector<host::PinNodePlan>> PlanAll(ssh::Transport& transport,
                                               const netplan::ClusterSpec& cluster,
                                               const profile::HostSpec& spec, bool unpin) {
  auto results = ssh::ForEachNode<host::PinNodePlan>(
      host::NodeNames(cluster), [&](const std::string& node) -> Result<host::PinNodePlan> {
        SPARK_ASSIGN_OR_RETURN(host::PinNodeInput in, host::ReadPinInput(transport, node));
        if (unpin) return host::PlanUnpin(in);
        return host::PlanPin(spec, in);
      });
  SPARK_RETURN_IF_ERROR(ssh::JoinNodeErrors(results));
  std::vector<host::PinNodePlan> plans;
  for (auto& r : results) plans.push_back(std::move(*r));
  return plans;
}

// "spark-1: <problem>" lines of what pin cannot do; empty when it can do everything.
std::string Problems(const std::vector<host::PinNodePlan>& plans) {
  std::string out;
  for (const auto& p : plans) {
    for (const auto& problem : p.problems) out += "  " + p.node + ": " + problem + "\n";
  }
  return out;
}

bool AnyBlocked(const std::vector<host::PinNodePlan>& plans) {
  for (const auto& p : plans) {
    if (!p.kernel_blocked.empty()) return true;
  }
  return false;
}

// Shows the plan and asks unless --yes. Returns an exit code when the command must stop.
std::optional<int> Confirm(const PinOptions& o, const std::vector<host::PinNodePlan>& plans) {
  if (o.plan_only) {
    if (o.json) std::printf("%s\n", PlanJson(plans, nullptr).dump(2).c_str());
    return kExitOk;
  }
  if (o.yes || CountChanges(plans) == 0) return std::nullopt;
  if (o.json || !isatty(STDIN_FILENO)) {
    std::fprintf(stderr, "sparkctl: host %s changes nodes: pass --yes (or --plan to look)\n",
                 o.unpin ? "unpin" : "pin");
    return kExitNeedsInput;
  }
  std::printf("apply these changes? [y/N] ");
  std::fflush(stdout);
  std::string answer;
  if (!std::getline(std::cin, answer) || (answer != "y" && answer != "yes")) {
    std::fprintf(stderr, "sparkctl: not confirmed; nothing changed (pass --yes to skip this)\n");
    return kExitNeedsInput;
  }
  return std::nullopt;
}

int RunPin(const PinOptions& o) {
  auto cluster = inventory::LoadClusterFile(o.cluster_file);
  if (!cluster.ok()) return ReportError(cluster.status());
  profile::HostSpec spec;
  if (!o.profile_file.empty()) {
    auto p = profile::LoadProfileFile(o.profile_file);
    if (!p.ok()) return ReportError(p.status());
    spec = p->host;
  }
  auto transport = host::MakeTransport(*cluster, {.accept_new = o.accept_new});
  if (!transport.ok()) return ReportError(transport.status());
  auto plans = PlanAll(**transport, *cluster, spec, o.unpin);
  if (!plans.ok()) return ReportError(plans.status());
  if (!o.json) PrintPlan(*plans);
  if (const std::string problems = Problems(*plans); !problems.empty() && !o.plan_only) {
    if (o.json) std::printf("%s\n", PlanJson(*plans, nullptr).dump(2).c_str());
    return ReportError(FailedPreconditionError("the kernel cannot be held on some nodes; "
                                               "nothing was changed:\n" + problems));
  }
  if (auto stop = Confirm(o, *plans)) {
    if (!o.json) PrintReboots(*plans);
    return *stop;
  }
  std::vector<Status> applied(plans->size());
  ssh::ParallelFor(plans->size(), ssh::kDefaultMaxParallel,
                   [&](size_t i) { applied[i] = host::ApplyPin(**transport, (*plans)[i]); });
  bool ok = true;
  for (const auto& s : applied) {
    if (s.ok()) continue;
    ok = false;
    if (!o.json) std::fprintf(stderr, "sparkctl: %s\n", s.message().c_str());
  }
  if (o.json) {
    std::printf("%s\n", PlanJson(*plans, &applied).dump(2).c_str());
  } else {
    std::printf("%s\n", ok ? "applied" : "FAILED on some nodes (see above)");
    PrintReboots(*plans);
  }
  return ok && !AnyBlocked(*plans) ? kExitOk : kExitFailed;
}

}  // namespace

void RegisterHostCommands(CLI::App& parent, CommandContext& context) {
  CLI::App* host = parent.add_subcommand("host", "Persistent host settings on every node");
  host->require_subcommand(1);
  auto o = std::make_shared<PinOptions>();
  CLI::App* pin = host->add_subcommand(
      "pin", "Hold the allowed kernel, add the profile's kernel options, raise memlock");
  AddClusterFlag(pin, &o->cluster_file);
  pin->add_option("-p,--profile", o->profile_file,
                  "Profile: kernel allow/deny lists, kernel options, memlock");
  pin->add_flag("--plan", o->plan_only, "Show the plan and change nothing");
  AddYesFlag(pin, &o->yes);
  AddJsonFlag(pin, &o->json, "schema sparkctl-host-pin/v1");
  pin->add_flag("--accept-new", o->accept_new, "Trust unknown host keys on first contact");
  SetExample(pin, "sparkctl host pin -c cluster.yaml -p profiles/deepseek-v41-flash-tp4-ring.yaml");
  pin->callback([o, &context] { context.exit_code = RunPin(*o); });

  auto u = std::make_shared<PinOptions>();
  u->unpin = true;
  CLI::App* unpin = host->add_subcommand(
      "unpin", "Undo `host pin`: remove its files, unhold the kernel packages it held");
  AddClusterFlag(unpin, &u->cluster_file);
  unpin->add_flag("--plan", u->plan_only, "Show the plan and change nothing");
  AddYesFlag(unpin, &u->yes);
  AddJsonFlag(unpin, &u->json, "schema sparkctl-host-pin/v1");
  unpin->add_flag("--accept-new", u->accept_new, "Trust unknown host keys on first contact");
  SetExample(unpin, "sparkctl host unpin -c cluster.yaml --yes");
  unpin->callback([u, &context] { context.exit_code = RunPin(*u); });
}

}  // namespace spark::cli
