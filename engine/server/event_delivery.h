// EventDelivery: runs the requests' event callbacks off the engine thread, so that turning
// tokens into text (streaming detokenizer, stop strings, reasoning and tool-call parsers) and
// writing SSE chunks overlap the next engine step instead of delaying it. A request's events
// always run on the same worker (chosen by its id), in the order they were posted.
// Thread-safety: Post from one thread (the engine's); callbacks run on the workers.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "engine/server/generation_service.h"

namespace spark::engine::server {

class EventDelivery {
 public:
  using Callback = std::shared_ptr<const EventCallback>;

  // `workers` >= 1 threads.
  explicit EventDelivery(int workers);
  // Runs every event posted so far, then stops the workers.
  ~EventDelivery();
  EventDelivery(const EventDelivery&) = delete;
  EventDelivery& operator=(const EventDelivery&) = delete;

  // Queues `event` for `callback` on request `id`'s worker.
  void Post(uint64_t id, Callback callback, GenerationEvent event);

 private:
  struct Worker {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::pair<Callback, GenerationEvent>> queue;
    bool stop = false;
    std::thread thread;
  };
  static void Run(Worker& w);

  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace spark::engine::server
