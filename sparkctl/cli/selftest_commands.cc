// `sparkctl selftest`: preflight's fabric checks, net verify, RDMA checks and an all-reduce
// correctness check, with a fix hint per failure (docs/selftest.md).
#include <cstdio>
#include <memory>
#include <string>

#include "sparkctl/cli/families.h"
#include "sparkctl/host/remote.h"
#include "sparkctl/inventory/cluster_yaml.h"
#include "sparkctl/selftest/selftest.h"

namespace spark::cli {
namespace {

struct SelftestFlags {
  std::string cluster_file = "cluster.yaml";
  bool quick = false;
  bool full = false;
  bool json = false;
  bool no_wireguard = false;
  std::string program;
};

int Run(const SelftestFlags& f) {
  const std::string schema = f.json ? "sparkctl-selftest/v1" : "";
  if (f.quick && f.full) {
    return ReportError(InvalidArgumentError("--quick and --full exclude each other"), schema);
  }
  auto spec = inventory::LoadClusterFile(f.cluster_file);
  if (!spec.ok()) return ReportError(spec.status(), schema);
  auto transport = host::MakeTransport(*spec, {});
  if (!transport.ok()) return ReportError(transport.status(), schema);
  selftest::SelftestOptions o;
  o.full = f.full;
  o.bench_program = f.program;
  o.wireguard = !f.no_wireguard;
  auto r = selftest::RunSelftest(**transport, *spec, o);
  if (!r.ok()) return ReportError(r.status(), schema);
  if (f.json) {
    std::printf("%s\n", selftest::ToJson(*r).dump(2).c_str());
  } else {
    std::printf("selftest (%s): %zu checks in %.1f s\n", f.full ? "full" : "quick",
                r->checks.size(), r->seconds);
    std::fputs(r->Summary().c_str(), stdout);
  }
  return r->ok() ? kExitOk : kExitFailed;
}

}  // namespace

void RegisterSelftestCommands(CLI::App& parent, CommandContext& context) {
  auto f = std::make_shared<SelftestFlags>();
  CLI::App* cmd = parent.add_subcommand(
      "selftest", "Check the fabric end to end: links, MTU, RDMA, net verify, all-reduce sums");
  AddClusterFlag(cmd, &f->cluster_file);
  cmd->add_flag("--quick", f->quick, "Checks without the link test (default)");
  cmd->add_flag("--full", f->full, "Also ping-pong every cable twin and a larger all-reduce");
  cmd->add_flag("--no-wireguard", f->no_wireguard, "The fabric was applied without WireGuard");
  cmd->add_option("--program", f->program,
                  "spark-bench for the nodes in place of their bundle's (default: the bundle's)");
  AddJsonFlag(cmd, &f->json, "schema sparkctl-selftest/v1");
  SetExample(cmd, "sparkctl selftest -c cluster.yaml --full\n"
                  "Prints `All checks passed.` or each failing check with its fix; exit 2 on "
                  "failure.");
  cmd->callback([f, &context] { context.exit_code = Run(*f); });
}

}  // namespace spark::cli
