// `sparkctl bench allreduce|allgather|link`: collectives in nccl-tests format and per-cable link
// latency/bandwidth (docs/bench.md). `bench serve` is in serving_commands.cc.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "sparkctl/bench/launch.h"
#include "sparkctl/bench/link_bench.h"
#include "sparkctl/cli/families.h"
#include "sparkctl/fabric/fabric_plan.h"
#include "sparkctl/host/remote.h"
#include "sparkctl/inventory/cluster_yaml.h"

namespace spark::cli {
namespace {

struct CollectiveFlags {
  bench::CollectiveOptions o;
  std::string b = "32M", e = "32M", i = "1M";
  int gpus = 1;
  std::string cluster_file;  // empty = local mode
  std::string program;
  int port = 29600;
  int timeout_s = 600;
  int collective_timeout_s = 120;
};

struct LinkFlags {
  std::string cluster_file = "cluster.yaml";
  std::string pairs = "neighbours";
  std::string size = "1M";
  double seconds = 1.0;
  bool json = false;
  bool tcp_only = false;
  std::string program;
  int port = 29700;
};

struct Cluster {
  netplan::ClusterSpec spec;
  std::unique_ptr<ssh::Transport> transport;
  fabric::ClusterChanges changes;
};

Result<Cluster> OpenCluster(const std::string& file) {
  Cluster c;
  SPARK_ASSIGN_OR_RETURN(c.spec, inventory::LoadClusterFile(file));
  SPARK_ASSIGN_OR_RETURN(c.transport, host::MakeTransport(c.spec, {}));
  auto changes = fabric::PlanChanges(*c.transport, c.spec, {});
  if (!changes.ok()) {
    return changes.status().WithContext(file + ": cannot plan the fabric (run `sparkctl discover` "
                                        "and `sparkctl net apply` first)");
  }
  c.changes = std::move(*changes);
  return c;
}

int RunCollective(bench::Collective kind, CollectiveFlags f) {
  f.o.collective = kind;
  for (auto [text, flag, out] : {std::tuple{&f.b, "-b", &f.o.min_bytes},
                                 std::tuple{&f.e, "-e", &f.o.max_bytes},
                                 std::tuple{&f.i, "-i", &f.o.step_bytes}}) {
    auto v = bench::ParseByteSize(*text, flag);
    if (!v.ok()) return ReportError(v.status());
    *out = *v;
  }
  if (f.collective_timeout_s < 1) {
    return ReportError(InvalidArgumentError("--collective-timeout must be at least 1 second"));
  }
  f.o.timeout = std::chrono::seconds(f.collective_timeout_s);
  if (Status s = f.o.Validate(); !s.ok()) return ReportError(s);
  // Local runs use the spark-bench next to sparkctl; cluster runs their bundle's, unless given.
  auto program = f.cluster_file.empty() || !f.program.empty() ? bench::FindBenchProgram(f.program)
                                                              : Result<std::string>(std::string());
  if (!program.ok()) return ReportError(program.status());
  auto timeout = std::chrono::seconds(f.timeout_s);
  Result<bench::RunReport> run = InternalError("not run");
  if (f.cluster_file.empty()) {
    run = bench::RunLocal(*program, f.o, f.gpus, f.o.backend != "gloo", timeout, !f.o.json);
    if (run.ok() && f.o.json) std::fputs(run->output.c_str(), stdout);
  } else {
    auto c = OpenCluster(f.cluster_file);
    if (!c.ok()) return ReportError(c.status());
    const fabric::ControlPlane control = fabric::ProbeControlPlane(*c->transport, c->changes);
    if (!control.wireguard) {
      std::fprintf(stderr, "sparkctl: warning: control traffic over the %s\n",
                   control.Describe().c_str());
    }
    std::vector<bench::ClusterRank> ranks = bench::ClusterRanks(c->changes, control);
    run = bench::RunCluster(*c->transport, *program, f.o, ranks, f.port, timeout);
    if (run.ok()) std::fputs(run->output.c_str(), stdout);
  }
  if (!run.ok()) return ReportError(run.status());
  if (run->exit_code != 0) {
    std::fprintf(stderr, "sparkctl: wrong results (see #wrong above); the fabric or a GPU "
                         "corrupts data: run `sparkctl selftest --full`\n");
    return kExitFailed;
  }
  return kExitOk;
}

void AddCollective(CLI::App* bench, bench::Collective kind, CommandContext& context) {
  auto f = std::make_shared<CollectiveFlags>();
  std::string name(bench::CollectiveName(kind));
  CLI::App* cmd = bench->add_subcommand(
      name, name + " bandwidth and correctness over a size sweep, in nccl-tests' " +
                std::string(bench::NcclTestsName(kind)) + " format");
  cmd->add_option("-b,--minbytes", f->b, "Smallest size, bytes with K/M/G (default 32M)");
  cmd->add_option("-e,--maxbytes", f->e, "Largest size (default 32M)");
  cmd->add_option("-f,--stepfactor", f->o.step_factor, "Multiply the size by this (default 1: add -i)");
  cmd->add_option("-i,--stepbytes", f->i, "Add this when -f is 1 (default 1M)");
  cmd->add_option("-n,--iters", f->o.iters, "Timed iterations per size (default 20)");
  cmd->add_option("-w,--warmup_iters", f->o.warmup_iters, "Warm-up iterations (default 1)");
  // Long only: -c is --cluster on every sparkctl command (nccl-tests spells --check -c).
  cmd->add_option("--check", f->o.check,
                  "1 = check every result (default), 0 = skip (nccl-tests' -c; long only here, "
                  "-c is --cluster)");
  cmd->add_option("-g,--ngpus", f->gpus,
                  "Local mode: ranks on this host, one per GPU (or CPU ranks with Gloo); default 1");
  AddClusterFlag(cmd, &f->cluster_file,
                 "Cluster mode: one rank per node of this inventory, started over SSH (default: "
                 "local mode)");
  cmd->add_option("--transport,--backend", f->o.backend,
                  "auto (NCCL on GPUs, else Gloo; default), nccl, gloo, or oneshot (the one-shot "
                  "transport for small messages: docs/comm.md)");
  cmd->add_option("--wire", f->o.oneshot_wire,
                  "--transport oneshot: socket (default; TCP) or rdma (RC verbs over the "
                  "ConnectX ports)");
  cmd->add_option("--oneshot-topology", f->o.oneshot_topology,
                  "--transport oneshot in local mode: mesh (default), ring or line (relays "
                  "non-adjacent ranks); cluster mode follows the fabric");
  cmd->add_option("--program", f->program,
                  "spark-bench to run (default: next to sparkctl; on a cluster, the bundle's)");
  cmd->add_option("--port", f->port, "Cluster mode: rendezvous port on rank 0 (default 29600)");
  cmd->add_option("--timeout", f->timeout_s, "Give up after this many seconds (default 600)");
  cmd->add_option("--collective-timeout", f->collective_timeout_s,
                  "A rank that waits this many seconds for a peer in the rendezvous or one "
                  "collective fails, naming the peer where the transport can (default 120)");
  AddJsonFlag(cmd, &f->o.json, "schema sparkctl-bench-collective/v1");
  SetExample(cmd, "sparkctl bench " + name + " -b 8 -e 1G -f 2 -g 2\n  sparkctl bench " + name +
                      " -b 1M -e 256M -f 4 -c cluster.yaml --json\n  sparkctl bench " + name +
                      " -b 4K -e 64K -f 2 -c cluster.yaml --transport oneshot --wire rdma\n"
                      "busbw = algbw * " +
                      (kind == bench::Collective::kAllReduce ? "2(n-1)/n" : "(n-1)/n") +
                      " (nccl-tests' convention): compare it with the link speed.");
  cmd->callback([f, kind, &context] { context.exit_code = RunCollective(kind, *f); });
}

int RunLink(const LinkFlags& f) {
  if (f.pairs != "neighbours" && f.pairs != "all") {
    return ReportError(InvalidArgumentError("--pairs '" + f.pairs + "': use neighbours or all"));
  }
  auto size = bench::ParseByteSize(f.size, "--size");
  if (!size.ok()) return ReportError(size.status());
  if (f.seconds <= 0) return ReportError(InvalidArgumentError("--seconds must be positive"));
  // The spark-bench of each node's bundle, unless --program names one.
  auto program = f.program.empty() ? Result<std::string>(std::string())
                                   : bench::FindBenchProgram(f.program);
  if (!program.ok()) return ReportError(program.status());
  auto c = OpenCluster(f.cluster_file);
  if (!c.ok()) return ReportError(c.status());
  bench::LinkBenchOptions o;
  o.all_pairs = f.pairs == "all";
  o.size = *size;
  o.duration = std::chrono::milliseconds(static_cast<int64_t>(f.seconds * 1000));
  o.port = f.port;
  o.use_rdma = !f.tcp_only;
  auto r = bench::RunLinkBench(*c->transport, c->changes, *program, o);
  if (!r.ok()) return ReportError(r.status());
  if (f.json) {
    std::printf("%s\n", bench::LinkReportJson(*r).dump(2).c_str());
  } else {
    std::fputs(bench::FormatLinkReport(*r).c_str(), stdout);
  }
  return r->ok() ? kExitOk : kExitFailed;
}

}  // namespace

void RegisterBenchCommands(CLI::App& parent, CommandContext& context) {
  CLI::App* bench = parent.add_subcommand(
      "bench", "Benchmark collectives (nccl-tests format), every fabric link, and serving");
  bench->require_subcommand(1);
  AddCollective(bench, bench::Collective::kAllReduce, context);
  AddCollective(bench, bench::Collective::kAllGather, context);
  auto f = std::make_shared<LinkFlags>();
  CLI::App* link = bench->add_subcommand(
      "link", "p50/p99 latency and bandwidth of every cable twin (RDMA verbs, else TCP)");
  AddClusterFlag(link, &f->cluster_file);
  link->add_option("--pairs", f->pairs, "neighbours (each cable twin; default) or all (every node pair)");
  link->add_option("--size", f->size, "Bytes per write in the bandwidth phase (default 1M)");
  link->add_option("--seconds", f->seconds, "Bandwidth phase per link in seconds (default 1)");
  link->add_flag("--tcp", f->tcp_only, "Measure over TCP even where RDMA devices exist");
  link->add_option("--program", f->program,
                   "spark-bench for the nodes in place of their bundle's (default: the bundle's)");
  link->add_option("--port", f->port, "TCP port of the link server (default 29700)");
  AddJsonFlag(link, &f->json, "schema sparkctl-bench-link/v1");
  SetExample(link, "sparkctl bench link -c cluster.yaml --pairs neighbours --seconds 2\n"
                   "Without RDMA verbs devices the numbers are TCP numbers, and the output says so.");
  link->callback([f, &context] { context.exit_code = RunLink(*f); });
  RegisterBenchServeCommand(bench, context);
}

}  // namespace spark::cli
