// Running the start / stop / probe commands of a launch plan on its nodes.
#include "sparkctl/up/launcher.h"

#include <algorithm>
#include <optional>
#include <set>
#include <thread>

#include "base/strings.h"
#include "sparkctl/ssh/parallel.h"

namespace spark::up {
namespace {

std::vector<std::string> PlanNodes(const LaunchPlan& plan) {
  std::vector<std::string> nodes;
  std::set<std::string> seen;
  for (const auto& r : plan.ranks) {
    if (seen.insert(r.node).second) nodes.push_back(r.node);
  }
  return nodes;
}

Result<StartedRank> StartOne(ssh::Transport& transport, const LaunchPlan& plan,
                             const RankLaunch& r) {
  SPARK_ASSIGN_OR_RETURN(auto probe, transport.Run(r.node, "test -d /run/systemd/system"));
  StartedRank s{.rank = r.rank, .systemd = probe.ok()};
  ssh::RunOptions o;
  o.timeout = std::chrono::seconds(30);
  auto run = ssh::RunChecked(transport, r.node, StartCommand(plan, r, s.systemd), o);
  if (!run.ok()) {
    return run.status().WithContext("rank " + std::to_string(r.rank) + ": start");
  }
  SPARK_ASSIGN_OR_RETURN(std::string pid, transport.ReadFile(r.node, r.pid_path));
  s.pid = std::atoi(pid.c_str());
  if (s.pid <= 0) {
    return AbortedError(r.node + ": rank " + std::to_string(r.rank) + ": no pid in " +
                        r.pid_path + " after start; see " + r.log_path);
  }
  return s;
}

}  // namespace

Result<std::vector<StartedRank>> StartRanks(ssh::Transport& transport, const LaunchPlan& plan) {
  std::vector<Result<StartedRank>> results(plan.ranks.size(), InternalError("not run"));
  ssh::ParallelFor(plan.ranks.size(), ssh::kDefaultMaxParallel, [&](size_t i) {
    results[i] = StartOne(transport, plan, plan.ranks[i]);
  });
  SPARK_RETURN_IF_ERROR(ssh::JoinNodeErrors(results));
  std::vector<StartedRank> started;
  for (auto& r : results) started.push_back(*r);
  return started;
}

Status StopRanks(ssh::Transport& transport, const LaunchPlan& plan,
                 std::vector<std::string>* report) {
  std::vector<Result<std::string>> results(plan.ranks.size(), InternalError("not run"));
  auto stop = [&](size_t i) {
    const RankLaunch& r = plan.ranks[i];
    ssh::RunOptions o;
    o.timeout = std::chrono::seconds(plan.stop_deadline_s + 15);
    auto run = ssh::RunChecked(transport, r.node, StopCommand(plan, r), o);
    if (!run.ok()) {
      results[i] = run.status().WithContext("rank " + std::to_string(r.rank));
      return;
    }
    results[i] = "rank " + std::to_string(r.rank) + " " + r.node + ": " +
                 std::string(Trim(run->stdout_data));
  };
  // Rank 0 first: it drains its requests and shuts the workers down cleanly; then whatever is
  // left, in parallel.
  if (!plan.ranks.empty()) stop(0);
  ssh::ParallelFor(plan.ranks.size() - std::min<size_t>(1, plan.ranks.size()),
                   ssh::kDefaultMaxParallel, [&](size_t i) { stop(i + 1); });
  for (auto& r : results) {
    if (r.ok() && report) report->push_back(*r);
  }
  return ssh::JoinNodeErrors(results);
}

std::vector<NodeProbe> ProbeNodes(ssh::Transport& transport, const LaunchPlan& plan,
                                  int metrics_samples, std::chrono::milliseconds timeout,
                                  bool node_extras) {
  const std::vector<std::string> nodes = PlanNodes(plan);
  std::vector<NodeProbe> probes(nodes.size());
  ssh::ParallelFor(nodes.size(), ssh::kDefaultMaxParallel, [&](size_t i) {
    const bool api = nodes[i] == plan.api_node;
    ssh::RunOptions o;
    o.timeout = timeout;
    auto run = transport.Run(
        nodes[i], ProbeCommand(plan, nodes[i], api, api ? metrics_samples : 0, 5, node_extras), o);
    Result<NodeProbe> parsed = run.ok() ? ParseProbe(nodes[i], run->stdout_data)
                                        : Result<NodeProbe>(run.status());
    if (parsed.ok()) {
      probes[i] = std::move(*parsed);
    } else {
      probes[i].node = nodes[i];
      probes[i].reachable = parsed.status();
    }
  });
  return probes;
}

Status WaitReady(ssh::Transport& transport, const LaunchPlan& plan, const WaitOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point degraded_since;
  bool degraded = false;
  while (true) {
    ClusterHealth h = Assess(plan, ProbeNodes(transport, plan));
    if (options.on_poll) options.on_poll(h);
    const auto now = std::chrono::steady_clock::now();
    if (h.health == Health::kReady) return Status::Ok();
    if (h.health == Health::kDegraded || h.health == Health::kDown) {
      if (!degraded) degraded_since = now;
      degraded = true;
      if (now - degraded_since >= options.degraded_grace) {
        return AbortedError(h.health == Health::kDown ? "no rank is running" : h.reason);
      }
    } else {
      degraded = false;
    }
    if (now - start >= options.timeout) {
      return DeadlineExceededError("the model was not ready after " +
                                   std::to_string(options.timeout.count() / 1000) + " s:\n" +
                                   RenderProgress(h));
    }
    std::this_thread::sleep_for(options.poll);
  }
}

}  // namespace spark::up
