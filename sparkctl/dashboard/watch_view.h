// The dashboard's snapshot as terminal text, for `sparkctl status --watch`: per node memory,
// swap, page cache, CMA, GPU and links; per rank phase, step time, age of the last step, busy or
// hung; the endpoint's load, rates, latency percentiles and caches; the latest events.
// Thread-safety: pure functions.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace spark::dashboard {

// `events`: the event log (array, oldest first); the last `max_events` are shown.
std::string RenderWatch(const nlohmann::ordered_json& snapshot,
                        const nlohmann::ordered_json& events, int max_events = 5);

}  // namespace spark::dashboard
