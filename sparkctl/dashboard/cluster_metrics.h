// The dashboard's cluster-wide GET /metrics (Prometheus text format 0.0.4): the nodes' series
// (`sparkctl_node_*{node}`), the links' (`sparkctl_link_*{node,device}`), the ranks'
// (`sparkctl_rank_*{node,rank}`) from a snapshot, and the engine's own /metrics body passed
// through with node="<rank 0's node>",rank="0" added to every sample, so one scrape of the
// controller gives Grafana everything `status` and the engine know.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace spark::dashboard {

// `snapshot`: SnapshotBuilder::Build's document; `engine_metrics`: rank 0's /metrics body as
// the same tick read it ("" when there was none).
std::string RenderClusterMetrics(const nlohmann::ordered_json& snapshot,
                                 std::string_view engine_metrics);

// `body` with `labels` (`node="a",rank="0"`) added to every sample line; comments unchanged.
std::string AddLabels(std::string_view body, const std::string& labels);

}  // namespace spark::dashboard
