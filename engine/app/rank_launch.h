// Rank start-up for the engine commands (`generate`, and `serve` when it goes multi-process):
// one process per tensor-parallel rank. StartRank connects the rank's communicator (Gloo over
// TCP; rank 0 serves the rendezvous at master_addr:master_port), agrees on the KV cache shape
// with rank 0, loads this rank's shards and builds its model runner. Rank 0 then drives a
// runtime::Engine over RankSession::runner() (which broadcasts every StepPlan); every other
// rank calls RankSession::RunWorker until rank 0 shuts the group down.
//
// SpawnLocalRanks starts N ranks on this machine as child processes (fork/exec) and supervises
// them: the first rank to fail is reported with its rank and exit status, the others are then
// killed, and no child outlives the launcher (PR_SET_PDEATHSIG).
// Thread-safety: a RankSession is used by one thread; SpawnLocalRanks blocks its caller.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/backend/backend.h"
#include "engine/comm/communicator.h"
#include "engine/core/model_config.h"
#include "engine/model/model.h"
#include "engine/model/model_runner.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/plan_broadcast.h"

namespace spark::engine::app {

struct RankOptions {
  std::string model_dir;
  // Compute backend; only "cpu" today.
  std::string backend = "cpu";
  int tp = 1;    // ranks in the group
  int rank = 0;  // this rank, in [0, tp)
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Rendezvous and per-collective deadline: a dead peer gives DeadlineExceeded, not a hang.
  std::chrono::milliseconds comm_timeout = std::chrono::seconds(60);
  // CPU threads for this rank's backend; 0 = hardware threads / tp.
  int threads = 0;
  // KV cache shape. Rank 0's values win: they are broadcast to the group, so workers may
  // leave num_kv_blocks at 0. Rank 0 needs num_kv_blocks > 0 and block_size > 0.
  int64_t num_kv_blocks = 0;
  int block_size = 16;
  model::MoeSharding moe_sharding = model::MoeSharding::kInsideExperts;
  // Testing only: a worker rank (> 0) that equals this exits with status 3 after running
  // this many plans, to exercise the launcher's failure path. -1 = off.
  int test_exit_rank = -1;
  int test_exit_after_plans = 1;

  // InvalidArgument naming the flag (--tp, --rank, --backend, --master-port, --block-size).
  Status Validate() const;
};

// One started rank: its communicator, backend, model shards, KV cache and runner.
class RankSession {
 public:
  ~RankSession();

  int rank() const { return options_.rank; }
  int world_size() const { return options_.tp; }
  const core::ModelConfig& config() const { return model_->config(); }
  // The KV cache shape agreed with rank 0 (size the engine's BlockManager from these).
  int64_t num_kv_blocks() const { return local_->num_blocks(); }
  int block_size() const { return local_->block_size(); }

  // Rank 0: the runner to give the runtime Engine (broadcasts each plan when tp > 1).
  runtime::ModelRunner* runner();
  // Ranks > 0: runs the plans rank 0 broadcasts until it shuts down. Errors name the rank.
  Status RunWorker();
  // Rank 0: tells the workers to leave RunWorker (also done by the destructor). Idempotent.
  Status Shutdown();

 private:
  friend Result<std::unique_ptr<RankSession>> StartRank(const RankOptions& options);
  explicit RankSession(const RankOptions& options) : options_(options) {}

  RankOptions options_;
  std::unique_ptr<comm::Communicator> comm_;  // null when tp == 1
  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<model::ModelStepRunner> local_;
  std::unique_ptr<runtime::BroadcastingModelRunner> broadcast_;
  bool shut_down_ = false;
};

// Starts this rank: communicator, KV shape agreement, model load, runner. Blocks until every
// rank has joined. InvalidArgument (options), DeadlineExceeded / Unavailable (rendezvous; the
// message names the missing rank), the checkpoint's NotFound / DataLoss, ResourceExhausted.
Result<std::unique_ptr<RankSession>> StartRank(const RankOptions& options);

// A free TCP port on 127.0.0.1 (bound then released; good enough for a local rendezvous).
// Unavailable when no socket can be bound.
Result<int> PickFreeLoopbackPort();

// Starts one child process per element of `argvs` (argvs[r] is rank r's argv; argv[0] is the
// program to exec, e.g. "/proc/self/exe"), sharing this process's stdout and stderr, and waits
// for all of them. Ok when every rank exits 0. Otherwise Internal "rank R exited with status S"
// (or "was killed by signal N") for the first rank that failed; the remaining ranks are then
// terminated. DeadlineExceeded when `timeout` (> 0) passes first.
Status SpawnLocalRanks(const std::vector<std::vector<std::string>>& argvs,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

}  // namespace spark::engine::app
