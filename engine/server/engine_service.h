// EngineService: the GenerationService over engine/runtime's Engine. One thread owns the
// engine: it takes submitted and cancelled requests from a queue, runs Engine::Step while any
// request is unfinished, and posts each step's tokens to the requests' callbacks, which run on
// delivery threads (event_delivery.h) while the engine goes on with the next step. A step
// that fails (a model or communicator error, e.g. a dead rank) fails every request in flight
// with that error, and the engine stays usable for later requests, unless SetBroken says the
// model is gone for good.
// Thread-safety: GenerationService methods from any thread; a request's callbacks run on one
// delivery thread, in order.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/runtime/engine.h"
#include "engine/server/event_delivery.h"
#include "engine/server/generation_service.h"

namespace spark::engine::server {

class EngineService : public GenerationService {
 public:
  // `engine` is driven only by this service from now on; max_model_len as the engine's.
  // `delivery_threads` run the callbacks.
  EngineService(std::unique_ptr<runtime::Engine> engine, int max_model_len, int vocab_size,
                int delivery_threads = 2);
  ~EngineService() override;  // Stops the thread; requests in flight finish with kAbort.

  Status Submit(GenerationRequest request, EventCallback callback) override;
  void Cancel(uint64_t id) override;
  ServiceStats Stats() const override;
  int max_model_len() const override { return max_model_len_; }
  int vocab_size() const override { return vocab_size_; }
  // Engine steps run so far (benchmarks).
  uint64_t num_steps() const;
  // The model can no longer run (a tensor-parallel rank died): requests in flight and every
  // later one finish with `error`, so /ready's canary reports it. A later call replaces it.
  void SetBroken(Status error);
  // What SetBroken said (Ok while the engine is usable); readable from any thread.
  Status broken() const override;

 private:
  struct Pending {
    GenerationRequest request;
    EventCallback callback;
  };

  void Loop();
  void Admit(std::vector<Pending>& submitted);
  void ApplyCancels(const std::vector<uint64_t>& cancelled);
  void RunStep();
  void FailAll(const Status& error);
  void FinishOne(uint64_t id, runtime::FinishReason reason, Status error);
  void RefreshStats();

  std::unique_ptr<runtime::Engine> engine_;
  const int max_model_len_;
  const int vocab_size_;
  // Events go out through delivery_ (declared before the engine thread, so it outlives it).
  EventDelivery delivery_;
  // Owned by the engine thread.
  std::map<uint64_t, EventDelivery::Callback> callbacks_;
  std::map<uint64_t, bool> first_token_sent_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pending> inbox_;
  std::vector<uint64_t> cancels_;
  bool stop_ = false;
  Status broken_;
  ServiceStats stats_;
  // The speculative counters at the last acceptance log line, and when it was written.
  uint64_t logged_drafts_ = 0, logged_draft_tokens_ = 0, logged_accepted_ = 0;
  std::chrono::steady_clock::time_point logged_at_;
  uint64_t num_steps_ = 0;
  bool in_step_ = false;
  std::chrono::steady_clock::time_point step_started_;
  std::thread thread_;
};

}  // namespace spark::engine::server
