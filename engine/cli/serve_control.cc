#include "engine/cli/serve_control.h"

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "base/logging.h"

namespace spark::engine::cli {

std::shared_ptr<ServeControl> ServeControl::Start(std::shared_ptr<RankStatus> status) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::shared_ptr<ServeControl> control(new ServeControl(std::move(status)));
  // Detached and sharing ownership: a signal during teardown still finds a live control.
  std::thread([control, signals] {
    while (true) {
      int sig = 0;
      if (sigwait(&signals, &sig) == 0) control->OnSignal(sig);
    }
  }).detach();
  return control;
}

void ServeControl::SetServing(bool serving) {
  std::lock_guard lock(mu_);
  serving_ = serving;
}

bool ServeControl::serving() const {
  std::lock_guard lock(mu_);
  return serving_;
}

void ServeControl::SetService(server::EngineService* service) {
  std::lock_guard lock(mu_);
  service_ = service;
  if (service_ && !failure_.ok()) service_->SetBroken(failure_);
}

void ServeControl::Fail(const Status& error, bool names_rank) {
  {
    std::lock_guard lock(mu_);
    if (stop_requested_) {  // Ctrl-C reaches the child ranks too: their exit is expected.
      Logger("engine.rank")->info("while stopping: {}", error.message());
      return;
    }
    const bool first = failure_.ok();
    if (!first && (!names_rank || failure_names_rank_)) return;
    failure_ = error;
    failure_names_rank_ = names_rank;
    if (service_) service_->SetBroken(error);
  }
  status_->Set(RankPhase::kFailed, error.message()).IgnoreError();
  cv_.notify_all();
}

Status ServeControl::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

Status ServeControl::AwaitNamedFailure(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, d, [this] { return failure_names_rank_ || stop_requested_; });
  return failure_names_rank_ ? failure_ : Status::Ok();
}

ServeControl::Event ServeControl::Wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return stop_requested_ || !failure_.ok(); });
  return failure_.ok() ? Event::kStop : Event::kFailed;
}

void ServeControl::SleepUnlessStopped(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, d, [this] { return stop_requested_; });
}

void ServeControl::ExitNow(RankPhase phase, const std::string& message, int code) {
  status_->Set(phase, message).IgnoreError();
  if (code != 0) std::fprintf(stderr, "spark-engine: %s\n", message.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

void ServeControl::SetOnReload(std::function<void()> on_reload) {
  std::lock_guard lock(mu_);
  on_reload_ = std::move(on_reload);
}

void ServeControl::OnSignal(int sig) {
  if (sig == SIGHUP) {
    std::function<void()> reload;
    {
      std::lock_guard lock(mu_);
      reload = on_reload_;
    }
    if (reload) return reload();
    Logger("engine.rank")->info("SIGHUP: nothing to reload");
    return;
  }
  const std::string name = sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "signal";
  {
    std::lock_guard lock(mu_);
    if (serving_) {
      if (!stop_requested_) Logger("engine.rank")->info("{}: draining", name);
      stop_requested_ = true;
      cv_.notify_all();
      return;
    }
  }
  ExitNow(RankPhase::kStopped, name + " received before serving; exiting", 0);
}

}  // namespace spark::engine::cli
