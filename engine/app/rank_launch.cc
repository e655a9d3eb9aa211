#include "engine/app/rank_launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/logging.h"
#include "engine/backend/cpu/cpu_backend.h"

namespace spark::engine::app {
namespace {

std::string RankName(int rank) { return "rank " + std::to_string(rank); }

// Testing only (RankOptions::test_exit_rank): runs `after` plans, then exits the process the
// way a crashed rank would, without telling anyone.
class ExitingRunner : public runtime::ModelRunner {
 public:
  ExitingRunner(runtime::ModelRunner* inner, int after) : inner_(inner), left_(after) {}
  int vocab_size() const override { return inner_->vocab_size(); }
  Result<std::vector<float>> Run(const runtime::StepPlan& plan) override {
    if (left_-- <= 0) std::_Exit(3);
    return inner_->Run(plan);
  }

 private:
  runtime::ModelRunner* inner_;
  int left_;
};

// Every rank learns which ranks failed to load, so a bad shard on one machine stops the whole
// group at start-up with that rank named instead of a collective timing out later.
Status AgreeLoaded(comm::Communicator& comm, const Status& mine) {
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
  return FailedPreconditionError("rank(s) " + failed + " failed to load the model");
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

Status RankOptions::Validate() const {
  if (backend != "cpu") return InvalidArgumentError("--backend: '" + backend + "' (want cpu)");
  if (tp < 1) return InvalidArgumentError("--tp must be >= 1");
  if (rank < 0 || rank >= tp) {
    return InvalidArgumentError("--rank " + std::to_string(rank) + " is outside [0, --tp " +
                                std::to_string(tp) + ")");
  }
  if (tp > 1 && (master_port <= 0 || master_port > 65535)) {
    return InvalidArgumentError("--master-port must be in [1, 65535]");
  }
  if (block_size < 1) return InvalidArgumentError("--block-size must be >= 1");
  if (rank == 0 && num_kv_blocks < 1) return InvalidArgumentError("--num-kv-blocks must be >= 1");
  return Status::Ok();
}

RankSession::~RankSession() { Shutdown().IgnoreError(); }

runtime::ModelRunner* RankSession::runner() {
  if (broadcast_) return broadcast_.get();
  return local_.get();
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
  Status s = runtime::RunWorkerLoop(*comm_, *runner);
  return s.ok() ? s : s.WithContext(RankName(options_.rank));
}

Status RankSession::Shutdown() {
  if (!broadcast_ || shut_down_) return Status::Ok();
  shut_down_ = true;
  return broadcast_->Shutdown();
}

Result<std::unique_ptr<RankSession>> StartRank(const RankOptions& options) {
  SPARK_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<RankSession> s(new RankSession(options));
  auto log = Logger("engine.rank");
  if (options.tp > 1) {
    comm::CommOptions co;
    co.backend = "gloo";
    co.rank = options.rank;
    co.world_size = options.tp;
    co.master_addr = options.master_addr;
    co.master_port = options.master_port;
    co.timeout = options.comm_timeout;
    SPARK_ASSIGN_OR_RETURN(s->comm_, comm::CreateCommunicator(co));
  }
  // Rank 0 decides the KV cache shape: its BlockManager hands out the block ids in the plans.
  int64_t shape[2] = {options.num_kv_blocks, options.block_size};
  if (s->comm_) SPARK_RETURN_IF_ERROR(s->comm_->Broadcast(shape, sizeof(shape), 0));
  const int threads =
      options.threads > 0
          ? options.threads
          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / options.tp);
  s->backend_ = std::make_unique<backend::cpu::CpuBackend>(threads);
  model::ModelOptions mo;
  mo.shard = {options.rank, options.tp};
  mo.moe_sharding = options.moe_sharding;
  Result<std::unique_ptr<model::Model>> loaded =
      model::LoadModel(options.model_dir, *s->backend_, s->comm_.get(), mo);
  if (s->comm_) SPARK_RETURN_IF_ERROR(AgreeLoaded(*s->comm_, loaded.status()));
  SPARK_RETURN_IF_ERROR(loaded.status());
  s->model_ = std::move(*loaded);
  SPARK_ASSIGN_OR_RETURN(
      s->local_, model::ModelStepRunner::Create(s->model_.get(), *s->backend_, shape[0],
                                                static_cast<int>(shape[1]), options.rank == 0));
  if (s->comm_ && options.rank == 0) {
    s->broadcast_ =
        std::make_unique<runtime::BroadcastingModelRunner>(s->comm_.get(), s->local_.get());
  }
  log->info("rank {}/{}: {} loaded, KV cache {} blocks x {} tokens, {} threads", options.rank,
            options.tp, options.model_dir, shape[0], shape[1], threads);
  return s;
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

Status SpawnLocalRanks(const std::vector<std::vector<std::string>>& argvs,
                       std::chrono::milliseconds timeout) {
  // argv arrays are built before fork: the child only calls async-signal-safe functions.
  std::vector<std::vector<char*>> cargs(argvs.size());
  for (size_t r = 0; r < argvs.size(); ++r) {
    if (argvs[r].empty()) return InvalidArgumentError(RankName(r) + ": empty argv");
    for (const std::string& a : argvs[r]) cargs[r].push_back(const_cast<char*>(a.c_str()));
    cargs[r].push_back(nullptr);
  }
  const pid_t parent = getpid();
  std::vector<pid_t> pids(argvs.size(), -1);
  for (size_t r = 0; r < argvs.size(); ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      const std::string err = std::strerror(errno);
      TerminateAll(pids);
      return InternalError("fork for " + RankName(r) + ": " + err);
    }
    if (pid == 0) {
      // The child dies with the launcher (the forking thread must stay alive: it is ours).
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(126);
      execv(cargs[r][0], cargs[r].data());
      _exit(127);
    }
    pids[r] = pid;
  }
  const auto start = std::chrono::steady_clock::now();
  size_t running = pids.size();
  while (running > 0) {
    // One sweep: every rank that ended since the last one. A crashed rank's peers fail soon
    // after it, so all failures of the sweep are reported, the sweep's first (lowest) rank
    // being not necessarily the cause.
    std::string failures;
    for (size_t r = 0; r < pids.size(); ++r) {
      if (pids[r] <= 0) continue;
      int st = 0;
      const pid_t got = waitpid(pids[r], &st, WNOHANG);
      if (got == 0) continue;
      pids[r] = -1;
      --running;
      if (got < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        failures += (failures.empty() ? "" : "; ") +
                    (got < 0 ? RankName(r) + ": waitpid failed" : DescribeExit(r, st));
      }
    }
    if (!failures.empty()) {
      TerminateAll(pids);
      return InternalError(failures);
    }
    if (timeout.count() > 0 && std::chrono::steady_clock::now() - start > timeout) {
      TerminateAll(pids);
      return DeadlineExceededError("local ranks still running after " +
                                   std::to_string(timeout.count()) + " ms");
    }
    if (running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return Status::Ok();
}

}  // namespace spark::engine::app
