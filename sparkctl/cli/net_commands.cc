// `sparkctl net plan|apply|verify|reset`: the fabric on the nodes (docs/fabric.md).
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "sparkctl/cli/families.h"
#include "sparkctl/fabric/apply.h"
#include "sparkctl/host/remote.h"
#include "sparkctl/inventory/cluster_yaml.h"

namespace spark::cli {
namespace {

using nlohmann::ordered_json;

struct NetOptions {
  std::string cluster_file = "cluster.yaml";
  bool json = false;
  bool yes = false;
  bool plan_only = false;
  int rollback_after_s = 120;
  bool no_wireguard = false;
};

ordered_json ChangesJson(const fabric::ClusterChanges& c) {
  ordered_json nodes = ordered_json::array();
  for (const auto& n : c.nodes) {
    ordered_json changes = ordered_json::array();
    for (const auto& ch : n.runtime) {
      changes.push_back({{"kind", netplan::ChangeKindName(ch.kind)},
                         {"description", ch.description},
                         {"command", ch.command ? ch.command->ToString() : ""}});
    }
    for (const auto& f : n.files)
      changes.push_back({{"kind", "write-file"}, {"description", f.file.path + ": " + f.why}});
    if (n.wireguard) changes.push_back({{"kind", "wireguard"}, {"description", n.wireguard_why}});
    if (n.qos) {
      changes.push_back({{"kind", "roce-lossless"}, {"description", "set PFC, DSCP trust, ECN: " + n.qos_why}});
    }
    // The NCCL environment each rank gets (`sparkctl up` passes it to the engine).
    ordered_json env = ordered_json::object();
    for (const auto& v : n.plan.nccl_env) env[v.name] = v.value;
    nodes.push_back({{"node", n.node},
                     {"management_interface", n.management_interface},
                     {"change_count", n.Count()},
                     {"changes", changes},
                     {"nccl_env", env},
                     {"gid_index_pending", n.gid_pending}});
  }
  return {{"change_count", c.Count()}, {"nodes", nodes}, {"notes", c.notes}};
}

ordered_json VerifyJson(const fabric::VerifyReport& v) {
  ordered_json checks = ordered_json::array();
  for (const auto& c : v.checks) {
    checks.push_back({{"node", c.node}, {"kind", c.kind}, {"target", c.target}, {"ok", c.ok},
                      {"detail", c.detail}, {"cable", c.cable}});
  }
  return {{"ok", v.ok()}, {"failures", v.Failures()}, {"seconds", v.seconds},
          {"suspect_cables", v.suspect_cables}, {"checks", checks}};
}

void PrintChanges(const fabric::ClusterChanges& c) {
  for (const auto& n : c.nodes) {
    std::printf("%s (management %s, untouched): %zu change%s\n", n.node.c_str(),
                n.management_interface.c_str(), n.Count(), n.Count() == 1 ? "" : "s");
    for (const auto& ch : n.runtime) std::printf("  %s\n", ch.description.c_str());
    for (const auto& f : n.files)
      std::printf("  write %s (%s)\n", f.file.path.c_str(), f.why.c_str());
    if (n.wireguard) std::printf("  %s\n", n.wireguard_why.c_str());
    if (n.qos) std::printf("  lossless RoCE (PFC, DSCP trust, ECN): %s\n", n.qos_why.c_str());
  }
  for (const auto& note : c.notes) std::printf("note: %s\n", note.c_str());
  std::printf("%zu change%s in total\n", c.Count(), c.Count() == 1 ? "" : "s");
}

void PrintVerify(const fabric::VerifyReport& v) {
  std::printf("verify: %zu checks, %zu failed, %.1f s\n", v.checks.size(), v.Failures(), v.seconds);
  std::printf("%s", v.Summary().c_str());
}

// Loads the inventory and connects; on failure reports and returns nullptr.
struct Session {
  netplan::ClusterSpec spec;
  std::unique_ptr<ssh::Transport> transport;
};
Result<Session> Open(const NetOptions& o) {
  SPARK_ASSIGN_OR_RETURN(netplan::ClusterSpec spec, inventory::LoadClusterFile(o.cluster_file));
  SPARK_ASSIGN_OR_RETURN(auto transport, host::MakeTransport(spec, {}));
  return Session{std::move(spec), std::move(transport)};
}

fabric::PlanOptions PlanOpts(const NetOptions& o) {
  fabric::PlanOptions p;
  p.control_plane = !o.no_wireguard;
  return p;
}

int RunPlan(const NetOptions& o) {
  auto s = Open(o);
  if (!s.ok()) return ReportError(s.status());
  auto c = fabric::PlanChanges(*s->transport, s->spec, PlanOpts(o));
  if (!c.ok()) return ReportError(c.status());
  if (o.json) {
    ordered_json out = {{"schema", "sparkctl-net-plan/v1"}};
    out.update(ChangesJson(*c));
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    PrintChanges(*c);
  }
  return kExitOk;
}

// Shows the plan and asks unless --yes. Returns an exit code when the command must stop.
std::optional<int> Confirm(const NetOptions& o, Session& s, const char* verb) {
  if (o.yes && !o.plan_only) return std::nullopt;
  auto c = fabric::PlanChanges(*s.transport, s.spec, PlanOpts(o));
  if (!c.ok()) return ReportError(c.status());
  if (!o.json) PrintChanges(*c);
  if (o.plan_only) return kExitOk;
  if (c->Count() == 0 && std::string(verb) == "apply") return std::nullopt;
  if (o.json) {
    std::fprintf(stderr, "sparkctl: net %s changes nodes: pass --yes\n", verb);
    return kExitNeedsInput;
  }
  std::printf("%s these changes? [y/N] ", verb);
  std::fflush(stdout);
  std::string answer;
  if (!std::getline(std::cin, answer) || (answer != "y" && answer != "yes")) {
    std::fprintf(stderr, "sparkctl: not confirmed; nothing changed (pass --yes to skip this)\n");
    return kExitNeedsInput;
  }
  return std::nullopt;
}

int RunApply(const NetOptions& o) {
  auto s = Open(o);
  if (!s.ok()) return ReportError(s.status());
  if (auto stop = Confirm(o, *s, "apply")) return *stop;
  fabric::ApplyOptions a;
  a.plan = PlanOpts(o);
  a.verify.wireguard = !o.no_wireguard;
  a.rollback_after = std::chrono::seconds(o.rollback_after_s);
  auto r = fabric::ApplyCluster(*s->transport, s->spec, a);
  if (!r.ok()) return ReportError(r.status());
  Status outcome = r->Outcome();
  if (o.json) {
    ordered_json nodes = ordered_json::array();
    for (const auto& n : r->nodes) {
      nodes.push_back({{"node", n.node}, {"changes", n.changes}, {"ok", n.status.ok()},
                       {"error", n.status.message()}});
    }
    ordered_json out = {{"schema", "sparkctl-net-apply/v1"}, {"ok", outcome.ok()},
                        {"seconds", r->seconds}, {"plan", ChangesJson(r->changes)},
                        {"nodes", nodes}, {"rolled_back", r->rolled_back},
                        {"rollback_reason", r->rollback_reason},
                        {"rollback_error", r->rollback_status.message()}};
    if (r->verify) out["verify"] = VerifyJson(*r->verify);
    std::printf("%s\n", out.dump(2).c_str());
    return outcome.ok() ? kExitOk : kExitFailed;
  }
  for (const auto& n : r->nodes)
    std::printf("%-10s %zu change%s %s\n", n.node.c_str(), n.changes, n.changes == 1 ? "" : "s",
                n.status.ok() ? "applied" : n.status.message().c_str());
  if (r->verify) PrintVerify(*r->verify);
  if (r->rolled_back && !r->rollback_status.ok())
    std::fprintf(stderr, "sparkctl: rollback incomplete: %s\n", r->rollback_status.message().c_str());
  if (!outcome.ok()) return ReportError(outcome);
  std::printf("applied %zu change%s and confirmed in %.1f s\n", r->changes.Count(),
              r->changes.Count() == 1 ? "" : "s", r->seconds);
  return kExitOk;
}

int RunVerify(const NetOptions& o) {
  auto s = Open(o);
  if (!s.ok()) return ReportError(s.status());
  auto c = fabric::PlanChanges(*s->transport, s->spec, PlanOpts(o));
  if (!c.ok()) return ReportError(c.status());
  fabric::VerifyOptions v;
  v.wireguard = !o.no_wireguard;
  auto r = fabric::VerifyCluster(*s->transport, *c, v);
  if (!r.ok()) return ReportError(r.status());
  if (o.json) {
    ordered_json out = {{"schema", "sparkctl-net-verify/v1"}};
    out.update(VerifyJson(*r));
    out["pending_changes"] = c->Count();
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    PrintVerify(*r);
    if (c->Count() > 0)
      std::printf("note: %zu planned change(s) not applied (sparkctl net plan)\n", c->Count());
  }
  return r->ok() ? kExitOk : kExitFailed;
}

int RunReset(const NetOptions& o) {
  auto s = Open(o);
  if (!s.ok()) return ReportError(s.status());
  if (!o.yes) {
    if (o.json) {
      std::fprintf(stderr, "sparkctl: net reset changes nodes: pass --yes\n");
      return kExitNeedsInput;
    }
    std::printf("reset removes sparkctl's fabric configuration from %zu nodes. Continue? [y/N] ",
                s->spec.nodes.size());
    std::fflush(stdout);
    std::string answer;
    if (!std::getline(std::cin, answer) || (answer != "y" && answer != "yes")) return kExitNeedsInput;
  }
  auto r = fabric::ResetCluster(*s->transport, s->spec, PlanOpts(o));
  if (!r.ok()) return ReportError(r.status());
  bool ok = true;
  ordered_json nodes = ordered_json::array();
  for (const auto& n : r->nodes) {
    ok = ok && n.status.ok();
    nodes.push_back({{"node", n.node}, {"changes", n.changes}, {"ok", n.status.ok()},
                     {"error", n.status.message()}});
    if (!o.json)
      std::printf("%-10s %s\n", n.node.c_str(),
                  n.status.ok() ? (std::to_string(n.changes) + " removed/restored").c_str()
                                : n.status.message().c_str());
  }
  if (o.json) {
    ordered_json out = {{"schema", "sparkctl-net-reset/v1"}, {"ok", ok}, {"seconds", r->seconds},
                        {"nodes", nodes}};
    std::printf("%s\n", out.dump(2).c_str());
  }
  return ok ? kExitOk : kExitFailed;
}

CLI::App* Add(CLI::App* net, const char* name, const char* help, NetOptions* o,
              const std::string& example) {
  CLI::App* cmd = net->add_subcommand(name, help);
  AddClusterFlag(cmd, &o->cluster_file);
  AddJsonFlag(cmd, &o->json);
  cmd->add_flag("--no-wireguard", o->no_wireguard, "Leave the WireGuard control plane out");
  SetExample(cmd, example);
  return cmd;
}

}  // namespace

void RegisterNetCommands(CLI::App& parent, CommandContext& context) {
  CLI::App* net = parent.add_subcommand("net", "Configure, verify and reset the fabric on the nodes");
  net->require_subcommand(1);
  auto o = std::make_shared<NetOptions>();

  CLI::App* plan = Add(net, "plan", "Show what apply would change on each node (changes nothing)",
                       o.get(), "sparkctl net plan -c cluster.yaml");
  plan->callback([o, &context] { context.exit_code = RunPlan(*o); });

  CLI::App* apply = Add(net, "apply",
                        "Apply the fabric plan (runtime + netplan file) with an automatic rollback",
                        o.get(), "sparkctl net apply -c cluster.yaml --yes");
  AddYesFlag(apply, &o->yes);
  apply->add_flag("--plan", o->plan_only, "Show the plan and change nothing");
  apply->add_option("--rollback-after", o->rollback_after_s,
                    "Seconds after which an unconfirmed node restores its old state (default 120)");
  apply->callback([o, &context] { context.exit_code = RunApply(*o); });

  CLI::App* verify = Add(net, "verify",
                         "Ping every fabric address, DF pings per link, check routes and next hops",
                         o.get(), "sparkctl net verify -c cluster.yaml --json");
  verify->callback([o, &context] { context.exit_code = RunVerify(*o); });

  CLI::App* reset = Add(net, "reset", "Remove what net apply added; nodes are left as before",
                        o.get(), "sparkctl net reset -c cluster.yaml --yes");
  AddYesFlag(reset, &o->yes);
  reset->callback([o, &context] { context.exit_code = RunReset(*o); });
}

}  // namespace spark::cli
