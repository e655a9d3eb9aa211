// ServeControl: what ends a `spark-engine serve` rank, and how. Two things can: a signal
// (SIGTERM or SIGINT) and a broken tensor-parallel group (a child rank exited, a collective
// failed). A dedicated thread waits for the signals (they are blocked in every other thread):
// before the rank serves (loading, connecting, and always on worker ranks, whose loop cannot be
// interrupted cleanly) a signal writes phase "stopped" and exits the process at once with status
// 0; once rank 0 serves, it wakes the serving loop, which drains and shuts the group down.
// Failures are handed to the EngineService (so /ready answers 503 with the error) and to the
// status file (phase "failed"); SIGHUP runs the reload callback (the TLS files), never stops; an error naming the rank that died replaces a vaguer one seen
// first (a communicator error usually arrives before the child's exit is noticed).
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

#include "base/status.h"
#include "engine/cli/rank_status_file.h"
#include "engine/server/engine_service.h"

namespace spark::engine::cli {

class ServeControl {
 public:
  // Blocks SIGTERM and SIGINT in the calling thread, so call it before any other thread starts
  // (they inherit the mask), and starts the signal thread. The thread and the control live until
  // the process exits.
  static std::shared_ptr<ServeControl> Start(std::shared_ptr<RankStatus> status);

  // From now on a signal asks Wait() to return instead of exiting the process.
  void SetServing(bool serving);
  bool serving() const;
  // What SIGHUP does (null: it is logged and ignored). Runs on the signal thread.
  void SetOnReload(std::function<void()> on_reload);
  // Where failures go while serving; null before the service is destroyed.
  void SetService(server::EngineService* service);

  // Reports the group broken. `names_rank`: the error says which rank ended; it replaces an
  // earlier error that did not. The first call, or a replacement, updates the service and the
  // status file. Ignored once a signal asked the rank to stop (ranks then end on purpose).
  void Fail(const Status& error, bool names_rank);
  // The failure reported so far (Ok when none).
  Status failure() const;
  // Waits up to `d` for a failure that names the rank that ended; that failure, or Ok.
  Status AwaitNamedFailure(std::chrono::milliseconds d);

  enum class Event { kStop, kFailed };
  // Blocks until a signal (while serving) or a failure.
  Event Wait();
  // Sleeps for `d` unless a signal comes first.
  void SleepUnlessStopped(std::chrono::milliseconds d);

  // Exits the process now with `code` after writing `phase` with `message` (used before the
  // rank serves: nothing needs draining and the children die with this process).
  [[noreturn]] void ExitNow(RankPhase phase, const std::string& message, int code);

 private:
  explicit ServeControl(std::shared_ptr<RankStatus> status) : status_(std::move(status)) {}
  void OnSignal(int sig);

  std::shared_ptr<RankStatus> status_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool serving_ = false;
  bool stop_requested_ = false;
  Status failure_;
  bool failure_names_rank_ = false;
  server::EngineService* service_ = nullptr;
  std::function<void()> on_reload_;
};

}  // namespace spark::engine::cli
