// Rank start-up for the engine commands `generate` and `serve`: one process per tensor-parallel
// rank. StartRank creates the rank's backend, connects its communicator (rank 0 serves the
// rendezvous at master_addr:master_port: Gloo over TCP for the CPU backend; for the CUDA backend
// NCCL on GPU `rank`, behind StreamOrderedCommunicator so host-pointer collectives work, with
// the peer all-reduce when all ranks share a host), agrees on the KV cache shape with rank 0,
// loads this rank's shards and builds its model runner,
// reporting its phases (connecting, loading with progress) to an optional RankStatus. Rank 0 then
// drives a runtime::Engine over RankSession::runner() (which broadcasts every StepPlan, and an
// empty "heartbeat" plan when the group has been idle for a while, so that idle workers never reach
// the communicator deadline); every other rank calls RankSession::RunWorker until rank 0 shuts the
// group down.
//
// StartLocalRanks starts ranks on this machine as child processes (fork/exec) and LocalRanks
// watches them; SpawnLocalRanks runs a whole group that way and waits: the first rank to fail
// is reported with its rank and exit status, the others are then killed, and no child outlives
// the launcher (PR_SET_PDEATHSIG).
// Thread-safety: a RankSession is driven by one thread (runner() / RunWorker), apart from its
// own heartbeat thread, which shares the communicator under a lock; LocalRanks is used by one
// thread at a time; SpawnLocalRanks blocks its caller.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "engine/cli/compute_choice.h"
#include "engine/cli/rank_status_file.h"
#include "engine/cli/startup_memory.h"
#include "engine/backend/backend.h"
#include "comm/communicator.h"
#include "comm/oneshot/setup.h"
#include "comm/rendezvous.h"
#include "engine/core/model_config.h"
#include "engine/model/memory_plan.h"
#include "engine/model/model.h"
#include "engine/model/step_runner.h"
#include "engine/runtime/host_memory.h"
#include "engine/runtime/memory_guard.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/plan_broadcast.h"

namespace spark::engine::cli {

struct RankOptions {
  std::string model_dir;
  // The checkpoint's tokenizer when a model needs it to load (DeepSeek-V4.1's Engram); empty:
  // model_dir.
  std::string tokenizer_dir;
  // Compute backend: "cpu" or "cuda" (rank r on CUDA device r % devices; NCCL when tp > 1).
  std::string backend = "cpu";
  // Element type of the Linear weights in backend memory: "auto" (compute_choice.h: the
  // checkpoint's on cuda, fp32 on cpu), "fp32", "bf16" or "fp8".
  std::string weight_dtype = "auto";
  // Element type of the KV cache: "auto" (that of the weights), "fp32" or "bf16".
  std::string kv_dtype = "auto";
  // Greedy decode steps as backend graphs where the model allows (dense; one rank or ranks on
  // one host with the peer all-reduce); unset: on for the cuda backend (the only one with
  // graphs).
  std::optional<bool> cuda_graphs;
  int tp = 1;    // ranks in the group
  int rank = 0;  // this rank, in [0, tp)
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Rendezvous and per-collective deadline: a dead peer gives DeadlineExceeded, not a hang.
  std::chrono::milliseconds comm_timeout = std::chrono::seconds(60);
  // tp > 1: all-reduces and all-gathers up to oneshot.max_bytes go through the one-shot
  // transport (comm/oneshot; on cpu over Gloo's group, on cuda staged through pinned host
  // memory), larger ones through Gloo or NCCL. Off (0) by default.
  comm::oneshot::OneShotSettings oneshot;
  // Rank 0: broadcast an empty plan when no plan went out for this long, so idle workers stay
  // inside comm_timeout and their status files fresh. 0 = comm_timeout / 4, kept within
  // [100 ms, 1 s].
  std::chrono::milliseconds heartbeat = std::chrono::milliseconds(0);
  // CPU threads for this rank's backend; 0 = hardware threads / tp.
  int threads = 0;
  // KV cache shape. Rank 0's values win: they are broadcast to the group, so workers may
  // leave num_kv_blocks at 0. Rank 0 needs num_kv_blocks > 0 and block_size > 0.
  int64_t num_kv_blocks = 0;
  int block_size = 16;
  // Rank 0, instead of num_kv_blocks: this fraction of the memory each node has available once
  // its weights are loaded becomes KV blocks, the group taking the smallest (kv_budget.h).
  // 0 = off.
  double kv_memory_fraction = 0;
  model::MoeSharding moe_sharding = model::MoeSharding::kInsideExperts;
  // Memory (memory_plan.h, startup_memory.h). The floors: unset = ScaledFloors of this node's
  // memory (a Spark's 5 / 3 / 1 GiB). The serve settings the plan counts the step's activations
  // at (rank 0's are broadcast with the KV shape). The ranks of the group on this machine (serve
  // starting local children: all of them). Where memory is read: null = /proc/meminfo and the
  // cgroup (ProcHostMemory); not owned.
  std::optional<model::MemoryFloors> floors;
  int64_t max_model_len = 8192;
  int max_num_seqs = 64;
  int max_batched_tokens = 2048;
  int speculative_tokens = 0;  // rank 0's --num-speculative-tokens (0: no drafts)
  bool load_draft = false;     // --speculative-method dspark: load the checkpoint's draft stack
  bool chunked_prefill = true;  // rank 0's: false with --no-chunked-prefill
  int ranks_on_host = 1;
  runtime::HostMemory* host_memory = nullptr;
  // Testing only: a worker rank (> 0) that equals this exits with status 3 after running
  // this many plans, to exercise the launcher's failure path. -1 = off.
  int test_exit_rank = -1;
  int test_exit_after_plans = 1;
  // Testing only (SPARK_TEST_STEP_DELAY_MS): sleep this long inside each step with work.
  std::chrono::milliseconds test_step_delay{0};
  // Where the phases connecting and loading (with progress) are reported, and, for workers,
  // ready / stopped / failed around RunWorker. Not owned; may be null.
  RankStatus* status = nullptr;
  // Rank 0: called once, from the thread that saw it, when a step or heartbeat fails on the
  // communicator (the group is broken: a peer died or hung), with that error prefixed by
  // "tensor-parallel group broken". Returns the error that every later step reports (the
  // caller may know better which rank died). Empty: the error as given.
  std::function<Status(const Status&)> on_group_error;

  // InvalidArgument naming the flag (--tp, --rank, --backend, --weight-dtype, --master-port,
  // --block-size, --oneshot-*).
  // A known backend that this build lacks is refused later, by backend::CreateBackend.
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
  // Ranks > 0: runs the plans rank 0 broadcasts until it shuts down (empty plans are rank 0's
  // heartbeats: nothing to run). Reports ready on entry, then stopped or failed, to
  // options.status. Errors name this rank and rank 0's address.
  Status RunWorker();
  // Rank 0: tells the workers to leave RunWorker (also done by the destructor). Idempotent.
  // The group's error when it is already broken.
  Status Shutdown();
  // Rank 0: gives up on a broken group: no more heartbeats, and Shutdown() and the destructor
  // send nothing (a collective with a dead peer would only wait for the deadline).
  void Abandon();
  // Rank 0: the steady-state memory guard over the group's nodes (the smallest available memory
  // of any rank, polled through the group when its ranks are on several machines), made once
  // with the session's floors and owned by it; the status file's ticker reports its state.
  runtime::MemoryGuard* memory_guard();
  const model::MemoryFloors& floors() const { return floors_; }

 private:
  class GroupRunner;
  friend Result<std::unique_ptr<RankSession>> StartRank(const RankOptions& options);
  explicit RankSession(const RankOptions& options);
  // tp > 1: sets comm_ (Gloo, or NCCL on backend_'s GPU). Rendezvous and NCCL errors.
  Status ConnectGroup();
  // The CUDA half of ConnectGroup; FailedPrecondition in a build without CUDA and NCCL.
  Status ConnectNccl();
  void StartHeartbeat();
  void StopHeartbeat();
  // KV blocks from `fraction` of the memory free after the weights, agreed by the group
  // (kv_budget.h): ResourceExhausted when a rank cannot hold one block.
  Result<int64_t> KvBlocksFromMemory(double fraction, int block_size, int64_t keep_bytes);
  // Sets memory_ and floors_, then the start-up memory guard (startup_memory.h) over the rank's
  // plan for `choice` and rank 0's `shape` (StartRank's broadcast).
  Result<StartupCheck> PlanMemory(const ComputeChoice& choice, const int64_t shape[8]);
  // InvalidArgument on every rank when some ranks load the draft model and others do not.
  Status AgreeOnDraft();
  // The group's least available memory (GroupRunner::PollMemory across machines, else this one).
  Result<runtime::GroupMemoryReading> GroupMemory();
  // Rewrites the status file every second while ready, with this node's memory (and on rank 0
  // the guard's state).
  void StartStatusTicker();

  RankOptions options_;
  // Declared so that each member outlives those built on it (destroyed in reverse order).
  std::unique_ptr<comm::Rendezvous> rendezvous_;  // cuda with tp > 1; rank 0 serves the store
  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<comm::Communicator> nccl_;  // cuda with tp > 1: device pointers on backend_'s GPU
  // The model's communicator: Gloo, or nccl_ behind StreamOrderedCommunicator. Null when tp == 1.
  std::unique_ptr<comm::Communicator> comm_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<model::ModelStepRunner> local_;
  std::unique_ptr<runtime::BroadcastingModelRunner> broadcast_;
  std::unique_ptr<GroupRunner> group_;  // rank 0 of tp > 1: broadcast_ under a lock
  class ProgressRunner;
  std::unique_ptr<ProgressRunner> progress_;  // rank 0 with a status: counts steps
  std::unique_ptr<runtime::HostMemory> own_memory_;  // when options.host_memory is null
  runtime::HostMemory* memory_ = nullptr;
  model::MemoryFloors floors_;
  std::unique_ptr<runtime::MemoryGuard> guard_;
  int64_t baseline_resident_ = -1;  // VmRSS just before loading (the status file reports it)
  bool shut_down_ = false;
  std::mutex heartbeat_mu_;
  std::condition_variable heartbeat_cv_;
  bool heartbeat_stop_ = false;
  std::thread heartbeat_;
};

// Starts this rank: communicator, KV shape agreement, model load, runner. Blocks until every
// rank has joined. InvalidArgument (options), DeadlineExceeded / Unavailable (rendezvous; the
// message names the missing rank), the checkpoint's NotFound / DataLoss, ResourceExhausted.
Result<std::unique_ptr<RankSession>> StartRank(const RankOptions& options);

// A free TCP port on 127.0.0.1 (bound then released; good enough for a local rendezvous).
// Unavailable when no socket can be bound.
Result<int> PickFreeLoopbackPort();

// Child processes running ranks of this group, started by StartLocalRanks.
class LocalRanks {
 public:
  ~LocalRanks();  // TerminateAll().

  // Ranks that ended since the last call. Ok when none did, or when all that did exited 0 and
  // `exit_zero_fails` is false. Otherwise Internal "rank R exited with status S" / "rank R was
  // killed by signal N (...)" for every rank that ended in this sweep (the first one named is
  // not necessarily the cause: a crashed rank's peers fail soon after it).
  Status Poll(bool exit_zero_fails);
  // True while any child has not been reaped.
  bool running() const;
  // Waits for every child: Ok when all exit 0; the first failing sweep's Poll error, or
  // DeadlineExceeded when `timeout` (> 0) passes first; the remaining ranks are then
  // terminated.
  Status Wait(std::chrono::milliseconds timeout);
  // SIGTERM, a grace period of 2 s, then SIGKILL; reaps every child still running.
  void TerminateAll();
  // The child's pid (-1 once reaped) for rank `rank`.
  pid_t pid(int rank) const;

 private:
  friend Result<std::unique_ptr<LocalRanks>> StartLocalRanks(
      const std::vector<std::vector<std::string>>& argvs, int first_rank);
  int first_rank_ = 0;
  std::vector<pid_t> pids_;
};

// Starts one child process per element of `argvs`: argvs[i] is rank first_rank + i's argv
// (argv[0] is the program to exec, e.g. "/proc/self/exe"). The children share this process's
// stdout and stderr and are killed if the calling thread exits (PR_SET_PDEATHSIG), so call it
// from a thread that lives as long as they should. InvalidArgument (empty argv), Internal (fork).
Result<std::unique_ptr<LocalRanks>> StartLocalRanks(
    const std::vector<std::vector<std::string>>& argvs, int first_rank);

// Starts one child process per element of `argvs` (argvs[r] is rank r's argv; argv[0] is the
// program to exec, e.g. "/proc/self/exe"), sharing this process's stdout and stderr, and waits
// for all of them. Ok when every rank exits 0. Otherwise Internal "rank R exited with status S"
// (or "was killed by signal N") for the first rank that failed; the remaining ranks are then
// terminated. DeadlineExceeded when `timeout` (> 0) passes first.
Status SpawnLocalRanks(const std::vector<std::vector<std::string>>& argvs,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

}  // namespace spark::engine::cli
