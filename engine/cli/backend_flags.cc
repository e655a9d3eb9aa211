#include "engine/cli/backend_flags.h"

#include <CLI/CLI.hpp>

namespace spark::engine::cli {

void AddBackendFlags(CLI::App* cmd, BackendFlags* flags) {
  cmd->add_option("--backend", flags->backend,
                  "cpu (default) or cuda; cuda needs a build with CUDA and a GPU");
  cmd->add_option("--weight-dtype", flags->weight_dtype,
                  "Linear weights in memory: auto (default: on cuda the checkpoint's type, bf16 "
                  "for fp32 and fp16 checkpoints; on cpu fp32), fp32, bf16 (half the memory; on "
                  "cuda about twice fp32's decode speed and tensor-core prefill attention, within "
                  "bf16 tolerance) or fp8 (E4M3 with 128 x 128 block scales, as DeepSeek and "
                  "Qwen3-FP8 checkpoints ship; other checkpoints are quantised on load); the "
                  "model family's row limits the choice (spark-engine info)");
  cmd->add_option("--kv-dtype", flags->kv_dtype,
                  "KV cache elements: auto (default: those of the weights, bf16 for fp8 "
                  "weights), fp32 or bf16 (half the cache memory and what attention reads per "
                  "step)");
  CLI::Option* on = cmd->add_flag("--cuda-graphs", flags->cuda_graphs,
                "Run greedy decode steps of a dense model as captured CUDA graphs, each launched "
                "while the engine still handles the step before (the default on --backend cuda; "
                "steps graphs cannot take run eagerly and are counted in /metrics)");
  cmd->add_flag("--no-cuda-graphs", flags->no_cuda_graphs,
                "Run every step eagerly (for comparisons and debugging)")
      ->excludes(on);
  comm::oneshot::OneShotSettings& o = flags->oneshot;
  cmd->add_option("--oneshot-max-bytes", o.max_bytes,
                  "With --tp > 1: all-reduces and all-gathers up to this many bytes go through "
                  "the one-shot transport (one wire hop per neighbour, a fixed-order sum), larger "
                  "ones through Gloo or NCCL; 0 (default) = off");
  cmd->add_option("--oneshot-wire", o.wire, "One-shot wire: socket (default; TCP) or rdma");
  cmd->add_option("--oneshot-topology", o.topology,
                  "One-shot links: mesh (default: every pair), ring or line (a switchless ring: "
                  "neighbours relay the other ranks)");
  cmd->add_option("--oneshot-addr", o.addresses,
                  "Local address of each one-shot link, ADDR[,ADDR] (ring: the cable to rank-1, "
                  "then to rank+1); default: the address that reaches --master-addr");
  cmd->add_option("--oneshot-rails", o.rails,
                  "--oneshot-wire rdma: each link's RDMA devices and GID index, "
                  "DEV:GID[+DEV:GID][,...] (sparkctl up passes them from the fabric plan)");
  cmd->add_option("--oneshot-traffic-class", o.traffic_class,
                  "--oneshot-wire rdma: the queue pairs' traffic class, DSCP << 2 | ECN (106: "
                  "DSCP 26, the lossless class `net apply` configures; sparkctl up passes "
                  "NCCL_IB_TC's value); default 0");
}

std::vector<std::string> BackendArgv(const BackendFlags& flags) {
  std::vector<std::string> a = {"--backend",        flags.backend, "--weight-dtype",
                                flags.weight_dtype, "--kv-dtype",  flags.kv_dtype};
  if (flags.cuda_graphs) a.push_back("--cuda-graphs");
  if (flags.no_cuda_graphs) a.push_back("--no-cuda-graphs");
  for (std::string& arg : flags.oneshot.Argv()) a.push_back(std::move(arg));
  return a;
}

void ApplyBackendFlags(const BackendFlags& flags, RankOptions* rank) {
  rank->backend = flags.backend;
  rank->weight_dtype = flags.weight_dtype;
  rank->kv_dtype = flags.kv_dtype;
  if (flags.cuda_graphs || flags.no_cuda_graphs) rank->cuda_graphs = flags.cuda_graphs;
  rank->oneshot = flags.oneshot;
}

}  // namespace spark::engine::cli
