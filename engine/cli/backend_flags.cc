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
}

std::vector<std::string> BackendArgv(const BackendFlags& flags) {
  std::vector<std::string> a = {"--backend",        flags.backend, "--weight-dtype",
                                flags.weight_dtype, "--kv-dtype",  flags.kv_dtype};
  if (flags.cuda_graphs) a.push_back("--cuda-graphs");
  if (flags.no_cuda_graphs) a.push_back("--no-cuda-graphs");
  return a;
}

void ApplyBackendFlags(const BackendFlags& flags, RankOptions* rank) {
  rank->backend = flags.backend;
  rank->weight_dtype = flags.weight_dtype;
  rank->kv_dtype = flags.kv_dtype;
  if (flags.cuda_graphs || flags.no_cuda_graphs) rank->cuda_graphs = flags.cuda_graphs;
}

}  // namespace spark::engine::cli
