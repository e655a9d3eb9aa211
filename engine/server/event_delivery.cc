#include "engine/server/event_delivery.h"

#include <algorithm>

namespace spark::engine::server {

EventDelivery::EventDelivery(int workers) {
  for (int i = 0; i < std::max(1, workers); ++i) {
    auto w = std::make_unique<Worker>();
    Worker* raw = w.get();
    w->thread = std::thread([raw] { Run(*raw); });
    workers_.push_back(std::move(w));
  }
}

EventDelivery::~EventDelivery() {
  for (auto& w : workers_) {
    {
      std::lock_guard lock(w->mu);
      w->stop = true;
    }
    w->cv.notify_one();
  }
  for (auto& w : workers_) w->thread.join();
}

void EventDelivery::Post(uint64_t id, Callback callback, GenerationEvent event) {
  Worker& w = *workers_[id % workers_.size()];
  {
    std::lock_guard lock(w.mu);
    w.queue.emplace_back(std::move(callback), std::move(event));
  }
  w.cv.notify_one();
}

void EventDelivery::Run(Worker& w) {
  std::deque<std::pair<Callback, GenerationEvent>> batch;
  while (true) {
    {
      std::unique_lock lock(w.mu);
      w.cv.wait(lock, [&] { return w.stop || !w.queue.empty(); });
      if (w.queue.empty()) return;  // stopped, and everything delivered
      batch.swap(w.queue);
    }
    for (auto& [callback, event] : batch) (*callback)(event);
    batch.clear();
  }
}

}  // namespace spark::engine::server
