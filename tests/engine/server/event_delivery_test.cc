#include "engine/server/event_delivery.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <thread>

namespace spark::engine::server {
namespace {

// Each request's events arrive in order, on a delivery thread, and none is lost at shutdown.
TEST(EventDeliveryTest, KeepsEachRequestsOrderOffThePostingThread) {
  std::mutex mu;
  std::map<uint64_t, std::vector<int32_t>> seen;
  bool on_poster = false;
  const std::thread::id poster = std::this_thread::get_id();
  {
    EventDelivery delivery(3);
    std::map<uint64_t, EventDelivery::Callback> callbacks;
    for (uint64_t id = 1; id <= 7; ++id) {
      callbacks[id] = std::make_shared<const EventCallback>([&, id](const GenerationEvent& e) {
        std::lock_guard lock(mu);
        on_poster = on_poster || std::this_thread::get_id() == poster;
        seen[id].push_back(e.token);
      });
    }
    for (int32_t t = 0; t < 200; ++t) {
      for (uint64_t id = 1; id <= 7; ++id) {
        GenerationEvent e;
        e.id = id;
        e.has_token = true;
        e.token = t;
        delivery.Post(id, callbacks[id], e);
      }
    }
  }  // the destructor delivers what is queued
  EXPECT_FALSE(on_poster);
  ASSERT_EQ(seen.size(), 7u);
  for (const auto& [id, tokens] : seen) {
    ASSERT_EQ(tokens.size(), 200u) << id;
    for (int32_t t = 0; t < 200; ++t) ASSERT_EQ(tokens[t], t) << "request " << id;
  }
}

}  // namespace
}  // namespace spark::engine::server
