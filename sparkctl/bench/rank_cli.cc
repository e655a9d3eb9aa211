// The command line of spark-bench (see rank_cli.h).
#include "sparkctl/bench/rank_cli.h"

#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "base/command_line.h"
#include "sparkctl/bench/collective_rank.h"
#include "sparkctl/bench/link_probe.h"
#include "sparkctl/bench/nccl_probe.h"
#include "sparkctl/rdma/verbs.h"

namespace spark::bench {
namespace {

struct RawCollective {
  std::string b = "32M", e = "32M", i = "1M", master = "127.0.0.1:29600";
  int timeout_s = 120;
};

int Fail(const Status& s) {
  std::fprintf(stderr, "spark-bench: %s\n", s.message().c_str());
  return 2;
}

int RunCollective(Collective c, CollectiveOptions o, const RawCollective& raw, RankPlacement p) {
  o.collective = c;
  o.timeout = std::chrono::seconds(raw.timeout_s);
  auto b = ParseByteSize(raw.b, "-b");
  auto e = ParseByteSize(raw.e, "-e");
  auto i = ParseByteSize(raw.i, "-i");
  if (!b.ok()) return Fail(b.status());
  if (!e.ok()) return Fail(e.status());
  if (!i.ok()) return Fail(i.status());
  o.min_bytes = *b;
  o.max_bytes = *e;
  o.step_bytes = *i;
  if (Status s = o.Validate(); !s.ok()) return Fail(s);
  size_t colon = raw.master.rfind(':');
  if (colon == std::string::npos)
    return Fail(InvalidArgumentError("--master '" + raw.master + "': use ADDR:PORT"));
  p.master_addr = raw.master.substr(0, colon);
  p.master_port = std::atoi(raw.master.c_str() + colon + 1);
  if (p.world_size < 1 || p.rank < 0 || p.rank >= p.world_size) {
    return Fail(InvalidArgumentError("--rank " + std::to_string(p.rank) + " is outside [0, " +
                                     "--world-size " + std::to_string(p.world_size) + ")"));
  }
  return RunCollectiveRank(o, p);
}

void AddCollective(CLI::App& app, Collective c, int* exit_code) {
  auto o = std::make_shared<CollectiveOptions>();
  auto raw = std::make_shared<RawCollective>();
  auto p = std::make_shared<RankPlacement>();
  std::string name(CollectiveName(c));
  CLI::App* cmd = app.add_subcommand(name, "One rank of the " + name + " benchmark (nccl-tests format)");
  cmd->add_option("-b,--minbytes", raw->b, "Smallest size (default 32M)");
  cmd->add_option("-e,--maxbytes", raw->e, "Largest size (default 32M)");
  cmd->add_option("-f,--stepfactor", o->step_factor, "Size multiplier (default 1: step by -i)");
  cmd->add_option("-i,--stepbytes", raw->i, "Size increment when -f is 1 (default 1M)");
  cmd->add_option("-n,--iters", o->iters, "Timed iterations per size (default 20)");
  cmd->add_option("-w,--warmup_iters", o->warmup_iters, "Warm-up iterations (default 1)");
  cmd->add_option("-c,--check", o->check, "Check results: 1 (default) or 0");
  cmd->add_option("--transport,--backend", o->backend,
                  "auto (default: nccl on GPUs, else gloo), nccl, gloo or oneshot");
  cmd->add_option("--oneshot-wire", o->oneshot_wire, "oneshot: socket (default) or rdma");
  cmd->add_option("--oneshot-topology", o->oneshot_topology,
                  "oneshot: mesh (default), ring or line (non-adjacent ranks relayed)");
  cmd->add_option("--oneshot-addr", p->oneshot_addresses,
                  "oneshot: local address of each link, ADDR[,ADDR] (default 127.0.0.1)");
  cmd->add_option("--oneshot-rails", p->oneshot_rails,
                  "oneshot over rdma: each link's rails, DEV:GID[+DEV:GID][,...]");
  cmd->add_option("--rank", p->rank, "This rank")->required();
  cmd->add_option("--world-size", p->world_size, "Number of ranks")->required();
  cmd->add_option("--master", raw->master, "Rendezvous ADDR:PORT served by rank 0");
  cmd->add_option("--device", p->device, "CUDA device of this rank (default 0)");
  cmd->add_option("--host-label", p->host_label, "Name shown for this rank (default hostname)");
  cmd->add_option("--timeout", raw->timeout_s, "Seconds before a missing rank is an error");
  AddJsonFlag(cmd, &o->json, "rank 0 prints the report");
  cmd->footer("Example:\n  spark-bench " + name +
              " -b 8 -e 128M -f 2 --rank 0 --world-size 2 --master 127.0.0.1:29600");
  cmd->callback([=] { *exit_code = RunCollective(c, *o, *raw, *p); });
}

void AddLink(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<LinkProbeOptions>();
  auto seconds = std::make_shared<double>(1.0);
  auto apply = [o, seconds] {
    o->duration = std::chrono::milliseconds(static_cast<int64_t>(*seconds * 1000));
  };
  CLI::App* serve = app.add_subcommand("link-serve", "Serve one link probe on a fabric address");
  serve->add_option("--bind", o->bind, "Address to listen on")->required();
  serve->add_option("--port", o->port, "TCP port (default 29700)");
  serve->add_option("--rdma", o->rdma_device, "RDMA device for an RC test (default: TCP only)");
  serve->add_option("--gid-index", o->gid_index, "RoCE v2 IPv4 GID index of the device");
  serve->footer("Example:\n  spark-bench link-serve --bind 198.18.0.2 --port 29700");
  serve->callback([=] {
    apply();
    Status s = ServeLink(*o);
    *exit_code = s.ok() ? 0 : Fail(s);
  });
  CLI::App* probe = app.add_subcommand("link-probe", "Measure one link against a link-serve");
  probe->add_option("--peer", o->peer, "The server's fabric address")->required();
  probe->add_option("--port", o->port, "TCP port (default 29700)");
  probe->add_option("--rdma", o->rdma_device, "RDMA device for an RC test (default: TCP)");
  probe->add_option("--gid-index", o->gid_index, "RoCE v2 IPv4 GID index of the device");
  probe->add_option("--size", o->size, "Bytes per write in the bandwidth phase (default 1 MiB)");
  probe->add_option("--seconds", *seconds, "Bandwidth phase length (default 1)");
  probe->add_option("--pingpongs", o->pingpongs, "Latency samples (default 1000)");
  probe->footer("Example:\n  spark-bench link-probe --peer 198.18.0.2 --seconds 2");
  probe->callback([=] {
    apply();
    auto r = ProbeLink(*o);
    if (!r.ok()) {
      *exit_code = Fail(r.status());
      return;
    }
    std::printf("%s\n", ToJson(*r).dump().c_str());
  });
  auto engine = std::make_shared<std::string>(), library = std::make_shared<std::string>();
  CLI::App* nccl = app.add_subcommand("nccl-info", "The NCCL an engine loads and its version (JSON)");
  nccl->add_option("--engine", *engine, "The spark-engine binary whose NCCL to report");
  nccl->add_option("--library", *library, "Open this libnccl instead");
  nccl->footer("Example:\n  spark-bench nccl-info --engine /usr/local/lib/sparkctl/spark-engine");
  nccl->callback([=] { std::printf("%s\n", ToJson(ProbeNccl(*engine, *library)).dump().c_str()); });
  CLI::App* info = app.add_subcommand("rdma-info", "The RDMA devices libibverbs can open (JSON)");
  info->callback([] { std::printf("%s\n", rdma::ToJson(rdma::ListVerbsDevices()).dump().c_str()); });
}

}  // namespace

int RunBenchCli(int argc, char** argv) {
  CLI::App app{"spark-bench: the per-node program of `sparkctl bench` and `sparkctl selftest`"};
  app.require_subcommand(1);
  int exit_code = 0;
  AddCollective(app, Collective::kAllReduce, &exit_code);
  AddCollective(app, Collective::kAllGather, &exit_code);
  AddLink(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}

}  // namespace spark::bench
