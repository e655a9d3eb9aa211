#include "engine/cli/rank_launch.h"

#include <arpa/inet.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/logging.h"
#include "comm/oneshot/oneshot_communicator.h"
#include "comm/socket.h"
#include "engine/cli/compute_choice.h"
#include "engine/cli/kv_budget.h"
#include "engine/cli/startup_memory.h"
#include "engine/config/environment.h"
#include "engine/model/model_family.h"
#include "base/strings.h"
#include "engine/backend/backend_factory.h"
#include "engine/backend/cpu/cpu_backend.h"
#if SPARK_HAVE_CUDA_TP
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/stream_ordered_communicator.h"
#include "comm/nccl_communicator.h"
#endif

namespace spark::engine::cli {
namespace {

std::string RankName(int rank) { return "rank " + std::to_string(rank); }

// Testing only (RankOptions::test_exit_rank): runs `after` plans, then exits the process the
// way a crashed rank would, without telling anyone.
class ExitingRunner : public runtime::ModelRunner {
 public:
  ExitingRunner(runtime::ModelRunner* inner, int after) : inner_(inner), left_(after) {}
  int vocab_size() const override { return inner_->vocab_size(); }
  std::string WhyNoSpeculation() const override { return inner_->WhyNoSpeculation(); }
  bool has_draft_model() const override { return inner_->has_draft_model(); }
  Result<std::vector<std::vector<int32_t>>> DraftTokens(const runtime::StepPlan& plan) override {
    return inner_->DraftTokens(plan);
  }
  Result<std::vector<float>> Run(const runtime::StepPlan& plan) override {
    if (left_-- <= 0) std::_Exit(3);
    return inner_->Run(plan);
  }

 private:
  runtime::ModelRunner* inner_;
  int left_;
};

// Counts a step with entries in the rank's status file: busy while it runs, then the step
// and token counters (a long prefill advances them every chunk).
// With `delay` (testing), the step takes that much longer.
Result<std::vector<float>> RunCounted(runtime::ModelRunner& inner, const runtime::StepPlan& plan,
                                      RankStatus* status, std::chrono::milliseconds delay) {
  if (plan.entries.empty()) return inner.Run(plan);
  if (status) status->StepStarted(plan.num_tokens());
  if (delay.count() > 0) std::this_thread::sleep_for(delay);
  Result<std::vector<float>> out = inner.Run(plan);
  if (status) status->StepFinished();
  return out;
}

// A worker's runner: empty plans are rank 0's heartbeats and run nothing (rank 0 does not run
// them either, so the forwards' collectives stay paired).
// Each plan, heartbeat or not, also refreshes the rank's status file (a live worker).
class HeartbeatAwareRunner : public runtime::ModelRunner {
 public:
  HeartbeatAwareRunner(runtime::ModelRunner* inner, RankStatus* status,
                       std::chrono::milliseconds delay)
      : inner_(inner), status_(status), delay_(delay) {}
  int vocab_size() const override { return inner_->vocab_size(); }
  std::string WhyNoSpeculation() const override { return inner_->WhyNoSpeculation(); }
  bool has_draft_model() const override { return inner_->has_draft_model(); }
  Result<std::vector<std::vector<int32_t>>> DraftTokens(const runtime::StepPlan& plan) override {
    return inner_->DraftTokens(plan);
  }
  Result<std::vector<float>> Run(const runtime::StepPlan& plan) override {
    if (status_) status_->Touch();
    if (plan.entries.empty()) return std::vector<float>();
    return RunCounted(*inner_, plan, status_, delay_);
  }

 private:
  runtime::ModelRunner* inner_;
  RankStatus* status_;
  std::chrono::milliseconds delay_;
};

// Every rank learns which ranks failed to load, so a bad shard on one machine stops the whole
// group at start-up with that rank named instead of a collective timing out later.
Status AgreeLoaded(comm::Communicator& comm, const Status& mine, const std::string& what) {
  const int world = comm.world_size();
  float ok = mine.ok() ? 1.0f : 0.0f;
  std::vector<float> all(world);
  SPARK_RETURN_IF_ERROR(comm.AllGather(&ok, 1, all.data()));
  if (!mine.ok()) return mine;
  std::string failed;
  for (int r = 0; r < world; ++r) {
    if (all[r] == 0.0f) failed += (failed.empty() ? "" : ", ") + std::to_string(r);
  }
  if (failed.empty()) return Status::Ok();
  return FailedPreconditionError("rank(s) " + failed + " failed to " + what +
                                 " (their logs and status files say why)");
}

std::string DescribeExit(int rank, int wstatus) {
  if (WIFEXITED(wstatus)) {
    return RankName(rank) + " exited with status " + std::to_string(WEXITSTATUS(wstatus));
  }
  if (WIFSIGNALED(wstatus)) {
    return RankName(rank) + " was killed by signal " + std::to_string(WTERMSIG(wstatus)) + " (" +
           strsignal(WTERMSIG(wstatus)) + ")";
  }
  return RankName(rank) + " ended with wait status " + std::to_string(wstatus);
}

// SIGTERM, a grace period, then SIGKILL; reaps every child still running.
void TerminateAll(std::vector<pid_t>& pids) {
  for (pid_t pid : pids) {
    if (pid > 0) kill(pid, SIGTERM);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (pid_t& pid : pids) {
    while (pid > 0) {
      int st = 0;
      if (waitpid(pid, &st, WNOHANG) != 0) {
        pid = -1;
      } else if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        pid = -1;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }
}

}  // namespace

// Rank 0's runner for tp > 1: the broadcasting runner under a lock shared with the heartbeat,
// remembering the first communicator error (after which the group is useless).
class RankSession::GroupRunner : public runtime::ModelRunner {
 public:
  GroupRunner(runtime::BroadcastingModelRunner* inner, comm::Communicator* comm,
              std::function<Status(const Status&)> on_error)
      : inner_(inner), comm_(comm), on_error_(std::move(on_error)) {}

  int vocab_size() const override { return inner_->vocab_size(); }
  std::string WhyNoSpeculation() const override { return inner_->WhyNoSpeculation(); }
  bool has_draft_model() const override { return inner_->has_draft_model(); }
  // A draft runs on every rank (a draft command, plan_broadcast.h): under the heartbeat's lock.
  Result<std::vector<std::vector<int32_t>>> DraftTokens(const runtime::StepPlan& plan) override {
    std::lock_guard lock(mu_);
    if (!broken_.ok()) return broken_;
    Result<std::vector<std::vector<int32_t>>> out = inner_->DraftTokens(plan);
    last_sent_ = std::chrono::steady_clock::now();
    if (!out.ok()) return Broke(out.status());
    return out;
  }
  runtime::DecodeStepCounts decode_steps() const override {
    std::lock_guard lock(mu_);
    return inner_->decode_steps();
  }

  Result<std::vector<float>> Run(const runtime::StepPlan& plan) override {
    if (plan.entries.empty()) return std::vector<float>();  // Nothing to run on any rank.
    std::lock_guard lock(mu_);
    if (!broken_.ok()) return broken_;
    Result<std::vector<float>> out = inner_->Run(plan);
    last_sent_ = std::chrono::steady_clock::now();
    if (!out.ok()) return Broke(out.status());
    return out;
  }

  // Broadcasts an empty plan when nothing went out for `idle`.
  void Heartbeat(std::chrono::milliseconds idle) {
    std::lock_guard lock(mu_);
    if (!broken_.ok() || std::chrono::steady_clock::now() - last_sent_ < idle) return;
    runtime::StepPlan empty;
    Status s = runtime::BroadcastPlan(*comm_, &empty);
    last_sent_ = std::chrono::steady_clock::now();
    if (!s.ok()) Broke(s).IgnoreError();  // The next step reports it.
  }

  // Every rank's available memory through the group (runtime::PollGroupMemory).
  Result<runtime::GroupMemoryReading> PollMemory(runtime::HostMemory& memory) {
    std::lock_guard lock(mu_);
    if (!broken_.ok()) return broken_;
    Result<runtime::GroupMemoryReading> out = runtime::PollGroupMemory(*comm_, memory);
    last_sent_ = std::chrono::steady_clock::now();
    if (!out.ok() && out.status().code() != StatusCode::kUnavailable) return Broke(out.status());
    return out;
  }

  Status Shutdown() {
    std::lock_guard lock(mu_);
    if (!broken_.ok()) return broken_;
    Status s = inner_->Shutdown();
    broken_ = s.ok() ? FailedPreconditionError("the group has been shut down") : s;
    return s;
  }

  void Abandon() {
    std::lock_guard lock(mu_);
    if (broken_.ok()) broken_ = AbortedError("the tensor-parallel group was abandoned");
  }

 private:
  Status Broke(const Status& s) {
    const Status wrapped = s.WithContext("tensor-parallel group broken");
    Logger("engine.rank")->error("{}", wrapped.ToString());
    broken_ = on_error_ ? on_error_(wrapped) : wrapped;
    if (broken_.ok()) broken_ = wrapped;
    return broken_;
  }

  runtime::BroadcastingModelRunner* inner_;
  comm::Communicator* comm_;
  std::function<Status(const Status&)> on_error_;
  mutable std::mutex mu_;
  Status broken_;
  std::chrono::steady_clock::time_point last_sent_ = std::chrono::steady_clock::now();
};

// Rank 0's runner with a status file: counts each step there (RunCounted).
class RankSession::ProgressRunner : public runtime::ModelRunner {
 public:
  ProgressRunner(runtime::ModelRunner* inner, RankStatus* status, std::chrono::milliseconds delay)
      : inner_(inner), status_(status), delay_(delay) {}
  int vocab_size() const override { return inner_->vocab_size(); }
  std::string WhyNoSpeculation() const override { return inner_->WhyNoSpeculation(); }
  bool has_draft_model() const override { return inner_->has_draft_model(); }
  Result<std::vector<std::vector<int32_t>>> DraftTokens(const runtime::StepPlan& plan) override {
    return inner_->DraftTokens(plan);
  }
  runtime::DecodeStepCounts decode_steps() const override { return inner_->decode_steps(); }
  Result<std::vector<float>> Run(const runtime::StepPlan& plan) override {
    return RunCounted(*inner_, plan, status_, delay_);
  }

 private:
  runtime::ModelRunner* inner_;
  RankStatus* status_;
  std::chrono::milliseconds delay_;
};

Status RankOptions::Validate() const {
  if (backend != "cpu" && backend != "cuda") {
    return InvalidArgumentError("--backend: '" + backend + "' (want cpu or cuda)");
  }
  if (tp < 1) return InvalidArgumentError("--tp must be >= 1");
  if (rank < 0 || rank >= tp) {
    return InvalidArgumentError("--rank " + std::to_string(rank) + " is outside [0, --tp " +
                                std::to_string(tp) + ")");
  }
  if (tp > 1 && (master_port <= 0 || master_port > 65535)) {
    return InvalidArgumentError("--master-port must be in [1, 65535]");
  }
  if (block_size < 1) return InvalidArgumentError("--block-size must be >= 1");
  if (auto dtype = backend::ParseDType(weight_dtype); weight_dtype != "auto" && !dtype.ok()) {
    return InvalidArgumentError("--weight-dtype: " + dtype.status().message() + " (or auto)");
  }
  if (auto kv = backend::ParseDType(kv_dtype);
      kv_dtype != "auto" && (!kv.ok() || *kv == backend::DType::kFP8)) {
    return InvalidArgumentError("--kv-dtype: '" + kv_dtype +
                                "' is not a KV cache type (choose auto, fp32 or bf16)");
  }
  if (rank == 0 && num_kv_blocks < 1 && kv_memory_fraction <= 0) {
    return InvalidArgumentError("--num-kv-blocks must be >= 1");
  }
  return oneshot.Validate();
}

RankSession::RankSession(const RankOptions& options) : options_(options) {}

RankSession::~RankSession() {
  if (options_.status) options_.status->StopTicker();  // it reads this session's members
  Shutdown().IgnoreError();
  StopHeartbeat();
}

runtime::ModelRunner* RankSession::runner() {
  if (progress_) return progress_.get();
  if (group_) return group_.get();
  return local_.get();
}

Result<runtime::GroupMemoryReading> RankSession::GroupMemory() {
  // Ranks on one machine share its memory: one reading is the group's.
  if (group_ && options_.ranks_on_host < options_.tp) return group_->PollMemory(*memory_);
  SPARK_ASSIGN_OR_RETURN(runtime::HostMemorySample s, memory_->Read());
  return runtime::GroupMemoryReading{s.available_bytes, options_.rank};
}

runtime::MemoryGuard* RankSession::memory_guard() {
  if (!guard_) {
    runtime::MemoryGuardOptions o;
    o.admit_floor_bytes = floors_.admit;
    o.hard_floor_bytes = floors_.hard;
    guard_ = std::make_unique<runtime::MemoryGuard>(o, [this] { return GroupMemory(); });
  }
  return guard_.get();
}

void RankSession::StartStatusTicker() {
  RankStatus* status = options_.status;
  if (status == nullptr) return;
  status->StartTicker(std::chrono::seconds(1), [this, status] {
    RankMemoryReport r;
    if (Result<runtime::HostMemorySample> s = memory_->Read(); s.ok()) {
      r.available_bytes = s->available_bytes;
    }
    if (guard_) r.guard = std::string(runtime::GuardStateName(guard_->status().state));
    if (Result<runtime::ProcessMemory> p = runtime::ReadProcessMemory(); p.ok()) {
      r.resident_bytes = p->resident_bytes;
      r.peak_resident_bytes = p->peak_resident_bytes;
    }
    r.baseline_resident_bytes = baseline_resident_;
    status->SetMemory(r);
  });
}

void RankSession::StartHeartbeat() {
  const std::chrono::milliseconds idle =
      options_.heartbeat.count() > 0
          ? options_.heartbeat
          : std::clamp(options_.comm_timeout / 4, std::chrono::milliseconds(100),
                       std::chrono::milliseconds(1000));
  heartbeat_ = std::thread([this, idle] {
    std::unique_lock lock(heartbeat_mu_);
    while (!heartbeat_cv_.wait_for(lock, idle / 2, [this] { return heartbeat_stop_; })) {
      lock.unlock();
      group_->Heartbeat(idle);
      if (options_.status) options_.status->Touch();
      lock.lock();
    }
  });
}

void RankSession::StopHeartbeat() {
  {
    std::lock_guard lock(heartbeat_mu_);
    heartbeat_stop_ = true;
  }
  heartbeat_cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
}

void RankSession::Abandon() {
  if (group_) group_->Abandon();
  shut_down_ = true;
  StopHeartbeat();
}

Status RankSession::RunWorker() {
  if (options_.rank == 0 || !comm_) {
    return FailedPreconditionError("RunWorker is for ranks > 0 of a tensor-parallel group");
  }
  runtime::ModelRunner* runner = local_.get();
  std::unique_ptr<ExitingRunner> exiting;
  if (options_.test_exit_rank == options_.rank) {
    exiting = std::make_unique<ExitingRunner>(runner, options_.test_exit_after_plans);
    runner = exiting.get();
  }
  RankStatus* status = options_.status;
  HeartbeatAwareRunner skipping(runner, status, options_.test_step_delay);
  if (status) status->Set(RankPhase::kReady, "running rank 0's plans").IgnoreError();
  Status s = runtime::RunWorkerLoop(*comm_, skipping, memory_);
  if (s.ok()) {
    if (status) status->Set(RankPhase::kStopped, "rank 0 shut the group down").IgnoreError();
    return s;
  }
  // Gloo's message names this rank and the peer's address; say which rank that address is
  // expected to be and what it means.
  s = s.WithContext(RankName(options_.rank) + " of " + std::to_string(options_.tp) +
                    ": lost the tensor-parallel group (rank 0 at " + options_.master_addr + ":" +
                    std::to_string(options_.master_port) +
                    " or another rank died, hung past --comm-timeout, or was stopped)");
  if (status) status->Set(RankPhase::kFailed, s.message()).IgnoreError();
  return s;
}

Status RankSession::Shutdown() {
  StopHeartbeat();
  if (!group_ || shut_down_) return Status::Ok();
  shut_down_ = true;
  return group_->Shutdown();
}

Status RankSession::ConnectGroup() {
  if (options_.status) {
    options_.status
        ->Set(RankPhase::kConnecting, "meeting " + std::to_string(options_.tp - 1) +
                                          " peer rank(s) via " + options_.master_addr + ":" +
                                          std::to_string(options_.master_port))
        .IgnoreError();
  }
  // Gloo cannot reduce device memory: the CUDA backend's group talks NCCL.
  if (options_.backend == "cuda") return ConnectNccl();
  comm::CommOptions co;
  co.backend = "gloo";
  co.rank = options_.rank;
  co.world_size = options_.tp;
  co.master_addr = options_.master_addr;
  co.master_port = options_.master_port;
  co.timeout = options_.comm_timeout;
  SPARK_ASSIGN_OR_RETURN(comm_, comm::CreateCommunicator(co));
  if (!options_.oneshot.enabled()) return Status::Ok();
  // Small all-reduces one-shot, the rest (and the set-up) over Gloo.
  SPARK_ASSIGN_OR_RETURN(std::string local, comm::LocalAddressFor(options_.master_addr));
  SPARK_ASSIGN_OR_RETURN(comm::oneshot::OneShotOptions oo,
                         options_.oneshot.ToOptions(local, options_.comm_timeout));
  SPARK_ASSIGN_OR_RETURN(comm_,
                         comm::oneshot::OneShotCommunicator::Create(std::move(comm_), oo));
  Logger("engine")->info("rank {}: all-reduces up to {} bytes one-shot over {}", options_.rank,
                         options_.oneshot.max_bytes, options_.oneshot.wire);
  return Status::Ok();
}

Status RankSession::ConnectNccl() {
#if SPARK_HAVE_CUDA_TP
  auto* gpu = dynamic_cast<backend::cuda::CudaBackend*>(backend_.get());
  if (gpu == nullptr) return InternalError("--backend cuda did not create a CUDA backend");
  comm::RendezvousOptions ro;
  ro.rank = options_.rank;
  ro.world_size = options_.tp;
  ro.master_addr = options_.master_addr;
  ro.master_port = options_.master_port;
  ro.timeout = options_.comm_timeout;
  SPARK_ASSIGN_OR_RETURN(rendezvous_, comm::Rendezvous::Connect(ro));
  SPARK_ASSIGN_OR_RETURN(std::unique_ptr<comm::NcclCommunicator> nccl,
                         comm::NcclCommunicator::Create(*rendezvous_, gpu->device(), "engine-tp",
                                                        options_.comm_timeout));
  // The model passes host pointers too (plan broadcast, logits gather): the wrapper stages them
  // and orders every collective after the backend's stream.
  auto ordered = std::make_unique<backend::cuda::StreamOrderedCommunicator>(nccl.get(), gpu);
  // Ranks on one host with peer access sum decode tensors directly (and may do so inside CUDA
  // graphs); across machines NCCL stays. Every rank gets the same answer.
  bool peer_on = false;
  if (Status peer = ordered->EnablePeerAllReduce(); peer.ok()) {
    peer_on = true;
    Logger("engine")->info("rank {}: peer all-reduce on (ranks share a host)", options_.rank);
  } else if (peer.code() == StatusCode::kUnavailable) {
    Logger("engine")->info("rank {}: collectives through NCCL ({})", options_.rank, peer.message());
  } else {
    return peer;
  }
  // Ranks on different machines: small all-reduces one-shot, staged through pinned host memory.
  if (options_.oneshot.enabled() && peer_on) {
    Logger("engine")->warn("rank {}: --oneshot-max-bytes not used: the ranks share a host and "
                           "sum through the peer all-reduce, which is faster",
                           options_.rank);
  } else if (options_.oneshot.enabled()) {
    SPARK_ASSIGN_OR_RETURN(std::string local, comm::LocalAddressFor(options_.master_addr));
    SPARK_ASSIGN_OR_RETURN(comm::oneshot::OneShotOptions oo,
                           options_.oneshot.ToOptions(local, options_.comm_timeout));
    SPARK_RETURN_IF_ERROR(ordered->EnableOneShot(oo, options_.oneshot.max_bytes));
    Logger("engine")->info("rank {}: device all-reduces up to {} bytes one-shot over {} (staged "
                           "through pinned host memory)",
                           options_.rank, options_.oneshot.max_bytes, options_.oneshot.wire);
  }
  comm_ = std::move(ordered);
  nccl_ = std::move(nccl);
  return Status::Ok();
#else
  return FailedPreconditionError(
      "--backend cuda with --tp > 1 needs NCCL: this spark-engine was built without it "
      "(install NCCL and rebuild with CUDA on), or use --tp 1 or --backend cpu");
#endif
}

Result<std::unique_ptr<RankSession>> StartRank(const RankOptions& options) {
  SPARK_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<RankSession> s(new RankSession(options));
  auto log = Logger("engine.rank");
  RankStatus* status = options.status;
  const int threads =
      options.threads > 0
          ? options.threads
          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / options.tp);
  // What to compute in (the "auto" choices from the checkpoint and the family), then the
  // backend: NCCL needs its GPU, and a build without CUDA refuses "cuda" here, before any peer
  // is waited for.
  SPARK_ASSIGN_OR_RETURN(const ComputeChoice choice,
                         ChooseCompute({.backend = options.backend,
                                        .model_dir = options.model_dir,
                                        .weight_dtype = options.weight_dtype,
                                        .kv_dtype = options.kv_dtype,
                                        .cuda_graphs = options.cuda_graphs}));
  const backend::DType weight_dtype = choice.weights;
  if (options.rank == 0) log->info("compute: {}", choice.Describe());
  SPARK_ASSIGN_OR_RETURN(
      s->backend_,
      backend::CreateBackend({.name = options.backend,
                              .threads = threads,
                              .rank = options.rank,
                              .step_timeout = options.comm_timeout,
                              .bf16_attention = weight_dtype != backend::DType::kF32}));
  if (options.tp > 1) SPARK_RETURN_IF_ERROR(s->ConnectGroup());
  // Rank 0 decides the KV cache shape (its BlockManager hands out the block ids in the plans)
  // and the serve settings the memory plans count at: blocks, block size, a fraction (in
  // millionths) instead of a block count (sized after the weights, below), max model length,
  // running sequences, tokens per step, draft tokens per sequence, chunked prefill.
  int64_t shape[8] = {options.num_kv_blocks,
                      options.block_size,
                      static_cast<int64_t>(options.kv_memory_fraction * 1e6 + 0.5),
                      options.max_model_len,
                      options.max_num_seqs,
                      options.max_batched_tokens,
                      options.speculative_tokens,
                      options.chunked_prefill ? 1 : 0};
  if (s->comm_) {
    SPARK_RETURN_IF_ERROR(s->comm_->Broadcast(shape, sizeof(shape), 0));
    SPARK_RETURN_IF_ERROR(s->AgreeOnDraft());
  }
  // The start-up memory guard, before anything is loaded; every rank learns who refused.
  Result<StartupCheck> memory = s->PlanMemory(choice, shape);
  model::ModelOptions mo;
  mo.shard = {options.rank, options.tp};
  mo.moe_sharding = options.moe_sharding;
  mo.weight_dtype = weight_dtype;
  mo.kv_dtype = choice.kv;
  mo.tokenizer_dir = options.tokenizer_dir;
  mo.load_draft = options.load_draft;
  if (status && memory.ok()) {
    status->Set(RankPhase::kLoading, "reading weights from " + options.model_dir).IgnoreError();
    mo.on_progress = [status](double fraction) { status->SetProgress(fraction); };
  }
  // Memory freed since start (the tokenizer's parse) goes back to the system first, so the
  // weights and the cache get pages of their own and the baseline is what the process holds.
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
  if (Result<runtime::ProcessMemory> p = runtime::ReadProcessMemory(); p.ok()) {
    s->baseline_resident_ = p->resident_bytes;
  }
  const auto load_start = std::chrono::steady_clock::now();
  Result<std::unique_ptr<model::Model>> loaded =
      memory.ok() ? model::LoadModel(options.model_dir, *s->backend_, s->comm_.get(), mo)
                  : Result<std::unique_ptr<model::Model>>(memory.status());
  const double load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  if (s->comm_) SPARK_RETURN_IF_ERROR(AgreeLoaded(*s->comm_, loaded.status(), "load the model"));
  SPARK_RETURN_IF_ERROR(loaded.status());
  if (status) status->SetProgress(1.0);
  s->model_ = std::move(*loaded);
  const int64_t keep =
      s->floors_.startup + int64_t{options.ranks_on_host} * StillToAllocate(memory->plan);
  if (shape[2] > 0) {
    SPARK_ASSIGN_OR_RETURN(shape[0], s->KvBlocksFromMemory(static_cast<double>(shape[2]) / 1e6,
                                                           static_cast<int>(shape[1]), keep));
  }
  SPARK_ASSIGN_OR_RETURN(
      s->local_, model::ModelStepRunner::Create(s->model_.get(), *s->backend_, shape[0],
                                                static_cast<int>(shape[1]), options.rank == 0,
                                                choice.cuda_graphs));
  // Again with the weights and the cache in: what the node really has left.
  Status after = CheckLoadedMemory(memory->plan, s->floors_, *s->memory_);
  if (s->comm_) {
    SPARK_RETURN_IF_ERROR(AgreeLoaded(*s->comm_, after, "keep the memory floor after loading"));
  }
  SPARK_RETURN_IF_ERROR(after);
  if (s->comm_ && options.rank == 0) {
    s->broadcast_ =
        std::make_unique<runtime::BroadcastingModelRunner>(s->comm_.get(), s->local_.get());
    s->group_ = std::make_unique<RankSession::GroupRunner>(s->broadcast_.get(), s->comm_.get(),
                                                           options.on_group_error);
    s->StartHeartbeat();
  }
  if ((status || options.test_step_delay.count() > 0) && options.rank == 0) {
    s->progress_ = std::make_unique<RankSession::ProgressRunner>(
        s->group_ ? static_cast<runtime::ModelRunner*>(s->group_.get()) : s->local_.get(), status,
        options.test_step_delay);
  }
  s->StartStatusTicker();
  const model::KvCacheSpec kv = s->model_->kv_cache_spec();
  const double kv_gib = static_cast<double>(shape[0]) * static_cast<double>(shape[1]) *
                        static_cast<double>(kv.bytes_per_token()) / (1024.0 * 1024.0 * 1024.0);
  log->info(
      "rank {}/{}: {} loaded ({} weights) in {:.2f} s, KV cache {} blocks x {} tokens "
      "({}, {:.2f} GiB), {} threads",
      options.rank, options.tp, options.model_dir, backend::DTypeName(weight_dtype), load_seconds,
      shape[0], shape[1], backend::DTypeName(kv.dtype), kv_gib, threads);
  return s;
}

// Every rank of a group drafts in lockstep when one does (a draft plan runs on all of them), so
// all must hold the draft model or none; each learns every rank's choice and a disagreement
// fails all of them, naming the ranks and the flag.
Status RankSession::AgreeOnDraft() {
  const float mine = options_.load_draft ? 1.0f : 0.0f;
  std::vector<float> all(comm_->world_size());
  SPARK_RETURN_IF_ERROR(comm_->AllGather(&mine, 1, all.data()));
  std::string with, without;
  for (size_t r = 0; r < all.size(); ++r) {
    std::string& list = all[r] != 0.0f ? with : without;
    list += (list.empty() ? "" : ", ") + std::to_string(r);
  }
  if (with.empty() || without.empty()) return Status::Ok();
  return InvalidArgumentError(
      "the ranks disagree on the draft model: rank(s) " + with +
      " were started with --speculative-method dspark, rank(s) " + without +
      " without; start every rank with the same --speculative-method");
}

Result<StartupCheck> RankSession::PlanMemory(const ComputeChoice& choice, const int64_t shape[8]) {
  if (options_.host_memory != nullptr) {
    memory_ = options_.host_memory;
  } else {
    own_memory_ = std::make_unique<runtime::ProcHostMemory>();
    memory_ = own_memory_.get();
  }
  SPARK_ASSIGN_OR_RETURN(core::ModelConfig config, model::LoadModelConfig(options_.model_dir));
  SPARK_ASSIGN_OR_RETURN(runtime::HostMemorySample sample, memory_->Read());
  floors_ = options_.floors.value_or(ScaledFloors(sample.total_bytes));
  SPARK_RETURN_IF_ERROR(floors_.Validate());
  model::PlanRequest r;
  r.backend = options_.backend;
  r.weight_dtype = choice.weights;
  r.kv_dtype = choice.kv;
  r.cuda_graphs = choice.cuda_graphs;
  r.tp = options_.tp;
  r.moe = options_.moe_sharding;
  r.draft = options_.load_draft;
  r.block_size = static_cast<int>(shape[1]);
  if (shape[2] > 0) {
    r.kv_memory_fraction = static_cast<double>(shape[2]) / 1e6;
  } else {
    r.kv_tokens = shape[0] * shape[1];
  }
  r.max_model_len = shape[3];
  r.max_num_seqs = static_cast<int>(shape[4]);
  r.max_batched_tokens = static_cast<int>(shape[5]);
  r.speculative_tokens = static_cast<int>(shape[6]);
  r.chunked_prefill = shape[7] != 0;
  const config::NcclBufferSettings nccl = config::ReadNcclBufferSettings();
  r.nccl_buffsize = nccl.buffsize;
  r.nccl_proto = nccl.proto;
  r.nccl_max_nchannels = nccl.max_nchannels;
  r.floors = floors_;
  return CheckStartupMemory(config, r, *memory_, options_.ranks_on_host);
}

Result<int64_t> RankSession::KvBlocksFromMemory(double fraction, int block_size,
                                                int64_t keep_bytes) {
  const int64_t per_token = model_->kv_cache_spec().bytes_per_token();
  Result<runtime::HostMemorySample> available = memory_->Read();
  Result<int64_t> mine =
      available.ok() ? cli::KvBlocksFromMemory(fraction, available->available_bytes, per_token,
                                               block_size, keep_bytes)
                     : Result<int64_t>(available.status());
  if (mine.ok()) {
    Logger("engine.rank")
        ->info("rank {}: KV cache from {} of the {} after the weights ({} kept free): {} blocks",
               options_.rank, FormatNumber(fraction), available->Describe(),
               HumanBytes(static_cast<uint64_t>(keep_bytes)), *mine);
  }
  if (!comm_) return mine;
  // Every rank learns every count (0: that rank failed) and takes the smallest, so the group
  // agrees on one shape or fails together.
  const float count = mine.ok() ? static_cast<float>(*mine) : 0.0f;
  std::vector<float> all(comm_->world_size());
  SPARK_RETURN_IF_ERROR(comm_->AllGather(&count, 1, all.data()));
  if (!mine.ok()) return mine.status().WithContext(RankName(options_.rank));
  const auto least = std::min_element(all.begin(), all.end());
  if (*least < 1.0f) {
    return ResourceExhaustedError(RankName(static_cast<int>(least - all.begin())) +
                                  " has no memory for one KV block at --kv-memory-fraction " +
                                  FormatNumber(fraction) + " (its log says how much it found)");
  }
  return static_cast<int64_t>(*least);
}

Result<int> PickFreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return UnavailableError(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string err = std::strerror(errno);
    close(fd);
    return UnavailableError("no free port on 127.0.0.1: " + err);
  }
  close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

LocalRanks::~LocalRanks() { TerminateAll(); }

void LocalRanks::TerminateAll() { cli::TerminateAll(pids_); }

bool LocalRanks::running() const {
  return std::any_of(pids_.begin(), pids_.end(), [](pid_t p) { return p > 0; });
}

pid_t LocalRanks::pid(int rank) const {
  const int i = rank - first_rank_;
  return i >= 0 && i < static_cast<int>(pids_.size()) ? pids_[i] : -1;
}

Status LocalRanks::Poll(bool exit_zero_fails) {
  std::string failures;
  for (size_t i = 0; i < pids_.size(); ++i) {
    if (pids_[i] <= 0) continue;
    int st = 0;
    const pid_t got = waitpid(pids_[i], &st, WNOHANG);
    if (got == 0) continue;
    pids_[i] = -1;
    const int rank = first_rank_ + static_cast<int>(i);
    if (got < 0 || exit_zero_fails || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      failures += (failures.empty() ? "" : "; ") +
                  (got < 0 ? RankName(rank) + ": waitpid failed" : DescribeExit(rank, st));
    }
  }
  return failures.empty() ? Status::Ok() : InternalError(failures);
}

Status LocalRanks::Wait(std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  while (running()) {
    if (Status s = Poll(/*exit_zero_fails=*/false); !s.ok()) {
      TerminateAll();
      return s;
    }
    if (!running()) break;
    if (timeout.count() > 0 && std::chrono::steady_clock::now() - start > timeout) {
      TerminateAll();
      return DeadlineExceededError("local ranks still running after " +
                                   std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return Status::Ok();
}

Result<std::unique_ptr<LocalRanks>> StartLocalRanks(
    const std::vector<std::vector<std::string>>& argvs, int first_rank) {
  // argv arrays are built before fork: the child only calls async-signal-safe functions.
  std::vector<std::vector<char*>> cargs(argvs.size());
  for (size_t i = 0; i < argvs.size(); ++i) {
    if (argvs[i].empty()) {
      return InvalidArgumentError(RankName(first_rank + static_cast<int>(i)) + ": empty argv");
    }
    for (const std::string& a : argvs[i]) cargs[i].push_back(const_cast<char*>(a.c_str()));
    cargs[i].push_back(nullptr);
  }
  std::unique_ptr<LocalRanks> ranks(new LocalRanks());
  ranks->first_rank_ = first_rank;
  ranks->pids_.assign(argvs.size(), -1);
  const pid_t parent = getpid();
  for (size_t i = 0; i < argvs.size(); ++i) {
    const pid_t pid = fork();
    if (pid < 0) {
      const std::string err = std::strerror(errno);
      return InternalError("fork for " + RankName(first_rank + static_cast<int>(i)) + ": " +
                           err);  // ~LocalRanks terminates those already started.
    }
    if (pid == 0) {
      // The child dies with the launcher (the forking thread must stay alive: it is ours).
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(126);
      sigset_t none;  // The mask survives exec: a launcher that blocks SIGTERM must not pass it on.
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      execv(cargs[i][0], cargs[i].data());
      _exit(127);
    }
    ranks->pids_[i] = pid;
  }
  return ranks;
}

Status SpawnLocalRanks(const std::vector<std::vector<std::string>>& argvs,
                       std::chrono::milliseconds timeout) {
  SPARK_ASSIGN_OR_RETURN(std::unique_ptr<LocalRanks> ranks, StartLocalRanks(argvs, 0));
  return ranks->Wait(timeout);
}

}  // namespace spark::engine::cli
