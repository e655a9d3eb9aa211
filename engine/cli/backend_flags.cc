#include "engine/cli/backend_flags.h"

#include <CLI/CLI.hpp>

namespace spark::engine::cli {

void AddBackendFlags(CLI::App* cmd, BackendFlags* flags) {
  cmd->add_option("--backend", flags->backend,
                  "cpu (default) or cuda; cuda needs a build with CUDA and a GPU");
  cmd->add_option("--weight-dtype", flags->weight_dtype,
                  "Linear weights in memory: fp32 (default), bf16 (half the memory; on cuda "
                  "about twice the decode speed and tensor-core prefill attention, within bf16 "
                  "tolerance) or fp8 (E4M3 with 128 x 128 block scales, as DeepSeek and "
                  "Qwen3-FP8 checkpoints ship: a quarter of fp32's memory; other checkpoints are "
                  "quantised on load; Qwen3 models)");
  cmd->add_option("--kv-dtype", flags->kv_dtype,
                  "KV cache elements: auto (default: those of --weight-dtype, bf16 for fp8 "
                  "weights), fp32 or bf16 (half "
                  "the cache memory and what attention reads per step; Qwen3 models)");
  cmd->add_flag("--cuda-graphs", flags->cuda_graphs,
                "With --backend cuda: run greedy decode steps of a dense model as captured CUDA "
                "graphs, on one GPU or tensor-parallel across GPUs of one host, each launched "
                "while the engine still handles the step before (opt-in; see docs/engine.md)");
}

std::vector<std::string> BackendArgv(const BackendFlags& flags) {
  std::vector<std::string> a = {"--backend",        flags.backend, "--weight-dtype",
                                flags.weight_dtype, "--kv-dtype",  flags.kv_dtype};
  if (flags.cuda_graphs) a.push_back("--cuda-graphs");
  return a;
}

void ApplyBackendFlags(const BackendFlags& flags, RankOptions* rank) {
  rank->backend = flags.backend;
  rank->weight_dtype = flags.weight_dtype;
  rank->kv_dtype = flags.kv_dtype;
  rank->cuda_graphs = flags.cuda_graphs;
}

}  // namespace spark::engine::cli
