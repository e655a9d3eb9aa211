// The compute flags `spark-engine generate` and `serve` share (--backend, --weight-dtype,
// --kv-dtype, --cuda-graphs, and the collective choice --oneshot-*): one definition of their help text, of how a launcher passes them on
// to the local rank processes it starts, and of how they fill RankOptions.
// Thread-safety: plain values and pure functions.
#pragma once

#include <string>
#include <vector>

#include "engine/cli/rank_launch.h"

namespace CLI {
class App;
}

namespace spark::engine::cli {

struct BackendFlags {
  std::string backend = "cpu";
  std::string weight_dtype = "auto";
  std::string kv_dtype = "auto";
  bool cuda_graphs = false;     // --cuda-graphs
  bool no_cuda_graphs = false;  // --no-cuda-graphs
  comm::oneshot::OneShotSettings oneshot;  // --oneshot-max-bytes, -wire, -topology, -addr, -rails
};

void AddBackendFlags(CLI::App* cmd, BackendFlags* flags);
// The flags again, for a child rank's argv.
std::vector<std::string> BackendArgv(const BackendFlags& flags);
void ApplyBackendFlags(const BackendFlags& flags, RankOptions* rank);

}  // namespace spark::engine::cli
