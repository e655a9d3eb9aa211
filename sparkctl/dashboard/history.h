// What the dashboard remembers: the latest snapshot (and the engine /metrics body read with it),
// one small row per tick for the last hour (HistoryRow), and the event log; and the listeners
// (the pages' SSE streams) that each new tick is pushed to.
// Thread-safety: every method may be called from any thread (one mutex). Listeners are called
// with the mutex released, from the thread that calls Add.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace spark::dashboard {

class History {
 public:
  // `max_rows`: rows kept (3600: an hour at 1 Hz); `max_events`: event log lines kept.
  explicit History(size_t max_rows = 3600, size_t max_events = 1000)
      : max_rows_(max_rows), max_events_(max_events) {}

  // Records a tick and pushes it to the listeners as one SSE message:
  //   event: tick\ndata: {"snapshot":...,"row":...,"events":[...]}\n\n
  void Add(nlohmann::ordered_json snapshot, std::string engine_metrics,
           std::vector<nlohmann::ordered_json> events);

  bool empty() const;
  nlohmann::ordered_json Latest() const;  // null before the first tick
  std::string LatestEngineMetrics() const;
  nlohmann::ordered_json Rows() const;    // array, oldest first
  nlohmann::ordered_json Events() const;  // array, oldest first
  // The first SSE message of a new stream: event "hello" with {"snapshot","rows","events"}.
  std::string HelloMessage() const;

  using Listener = std::function<void(const std::string& sse_message)>;
  int Listen(Listener listener);  // returns an id for Unlisten
  void Unlisten(int id);
  size_t num_listeners() const;

 private:
  const size_t max_rows_, max_events_;
  mutable std::mutex mu_;
  nlohmann::ordered_json latest_;
  std::string engine_metrics_;
  std::deque<nlohmann::ordered_json> rows_;
  std::deque<nlohmann::ordered_json> events_;
  std::map<int, Listener> listeners_;
  int next_id_ = 1;
};

// One server-sent event: "event: <name>\ndata: <data>\n\n" (data on one line).
std::string SseMessage(const std::string& name, const std::string& data);

}  // namespace spark::dashboard
