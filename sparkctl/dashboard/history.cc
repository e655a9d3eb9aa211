#include "sparkctl/dashboard/history.h"

#include <utility>

#include "sparkctl/dashboard/snapshot.h"

namespace spark::dashboard {

using nlohmann::ordered_json;

std::string SseMessage(const std::string& name, const std::string& data) {
  return "event: " + name + "\ndata: " + data + "\n\n";
}

void History::Add(ordered_json snapshot, std::string engine_metrics,
                  std::vector<ordered_json> events) {
  ordered_json row = HistoryRow(snapshot);
  ordered_json message = {{"snapshot", snapshot}, {"row", row}, {"events", events}};
  // A bad UTF-8 byte from a node (a log line in a problem text) must not stop the stream.
  const std::string sse =
      SseMessage("tick", message.dump(-1, ' ', false, ordered_json::error_handler_t::replace));
  std::vector<Listener> listeners;
  {
    std::lock_guard lock(mu_);
    latest_ = std::move(snapshot);
    engine_metrics_ = std::move(engine_metrics);
    rows_.push_back(std::move(row));
    while (rows_.size() > max_rows_) rows_.pop_front();
    for (auto& e : events) events_.push_back(std::move(e));
    while (events_.size() > max_events_) events_.pop_front();
    for (const auto& [id, l] : listeners_) listeners.push_back(l);
  }
  for (const Listener& l : listeners) l(sse);
}

bool History::empty() const {
  std::lock_guard lock(mu_);
  return latest_.is_null();
}

ordered_json History::Latest() const {
  std::lock_guard lock(mu_);
  return latest_;
}

std::string History::LatestEngineMetrics() const {
  std::lock_guard lock(mu_);
  return engine_metrics_;
}

ordered_json History::Rows() const {
  std::lock_guard lock(mu_);
  ordered_json a = ordered_json::array();
  for (const auto& r : rows_) a.push_back(r);
  return a;
}

ordered_json History::Events() const {
  std::lock_guard lock(mu_);
  ordered_json a = ordered_json::array();
  for (const auto& e : events_) a.push_back(e);
  return a;
}

std::string History::HelloMessage() const {
  ordered_json m = {{"snapshot", Latest()}, {"rows", Rows()}, {"events", Events()}};
  return SseMessage("hello", m.dump(-1, ' ', false, ordered_json::error_handler_t::replace));
}

int History::Listen(Listener listener) {
  std::lock_guard lock(mu_);
  const int id = next_id_++;
  listeners_[id] = std::move(listener);
  return id;
}

void History::Unlisten(int id) {
  std::lock_guard lock(mu_);
  listeners_.erase(id);
}

size_t History::num_listeners() const {
  std::lock_guard lock(mu_);
  return listeners_.size();
}

}  // namespace spark::dashboard
