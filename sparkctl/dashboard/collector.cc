#include "sparkctl/dashboard/collector.h"

#include <algorithm>
#include <utility>

#include "sparkctl/up/launcher.h"
#include "sparkctl/up/state_file.h"

namespace spark::dashboard {

Result<ssh::CommandResult> CountingTransport::Run(const std::string& node,
                                                  const std::string& command,
                                                  const ssh::RunOptions& options) {
  sent_ += command.size();
  auto r = inner_.Run(node, command, options);
  if (r.ok()) received_ += r->stdout_data.size() + r->stderr_data.size();
  return r;
}

Status CountingTransport::Upload(const std::string& node, const std::string& local_path,
                                 const std::string& remote_path, int mode) {
  return inner_.Upload(node, local_path, remote_path, mode);
}

Status CountingTransport::WriteFile(const std::string& node, const std::string& remote_path,
                                    std::string_view contents, int mode) {
  sent_ += contents.size();
  return inner_.WriteFile(node, remote_path, contents, mode);
}

Result<std::string> CountingTransport::ReadFile(const std::string& node, const std::string& path) {
  auto r = inner_.ReadFile(node, path);
  if (r.ok()) received_ += r->size();
  return r;
}

Collector::Collector(ssh::Transport& transport, std::string state_dir, History& history,
                     CollectorOptions options)
    : transport_(transport),
      state_dir_(std::move(state_dir)),
      history_(history),
      options_(options),
      builder_(options.metrics_window_s) {}

Collector::~Collector() { Stop(); }

void Collector::Start() {
  thread_ = std::thread([this] {
    auto next = std::chrono::steady_clock::now();
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      Tick();
      lock.lock();
      next += options_.interval;
      // A tick slower than the interval starts the next one at once, not a burst to catch up.
      next = std::max(next, std::chrono::steady_clock::now());
      cv_.wait_until(lock, next, [this] { return stop_; });
    }
  });
  if (!options_.preflight) return;
  preflight_thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      Preflight();
      lock.lock();
      cv_.wait_for(lock, options_.preflight_interval, [this] { return stop_; });
    }
  });
}

void Collector::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (preflight_thread_.joinable()) preflight_thread_.join();
}

void Collector::Preflight() {
  if (!options_.preflight) return;
  const std::vector<host::CheckResult> results = options_.preflight();
  const double t =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::map<std::string, host::CheckResult> now;
  for (const host::CheckResult& r : results) {
    if (r.verdict != host::Verdict::kOk) now[r.id + " " + r.node] = r;
  }
  auto where = [](const host::CheckResult& r) {
    return r.node.empty() ? std::string("the cluster") : r.node;
  };
  std::lock_guard lock(mu_);
  for (const auto& [key, r] : now) {
    auto before = findings_.find(key);
    if (before != findings_.end() && before->second.verdict == r.verdict &&
        before->second.seen == r.seen) {
      continue;
    }
    std::string text = "preflight " + r.id + " " + std::string(host::VerdictName(r.verdict)) +
                       " on " + where(r);
    if (!r.seen.empty()) text += ": " + r.seen;
    if (!r.hint.empty()) text += " (fix: " + r.hint + ")";
    preflight_events_.push_back({{"time", t}, {"kind", "preflight"}, {"text", text}});
  }
  for (const auto& [key, r] : findings_) {
    if (now.count(key) == 0) {
      preflight_events_.push_back({{"time", t},
                                   {"kind", "preflight"},
                                   {"text", "preflight " + r.id + " ok again on " + where(r)}});
    }
  }
  findings_ = std::move(now);
}

void Collector::Tick() {
  const auto start = std::chrono::steady_clock::now();
  TickInput in;
  in.time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                .count();
  auto state = up::LoadState(state_dir_);
  std::string engine_metrics;
  if (state.ok()) {
    in.plan = &state->plan;
    in.probes = up::ProbeNodes(transport_, state->plan, /*metrics_samples=*/1,
                               options_.probe_timeout);
    in.health = up::Assess(state->plan, in.probes);
    // As `status` does: the restart count as of after the probe.
    if (auto fresh = up::LoadState(state_dir_); fresh.ok()) state->restarts = fresh->restarts;
    in.restarts = state->restarts;
    for (const auto& p : in.probes) {
      if (p.node == state->plan.api_node && !p.metrics.empty()) engine_metrics = p.metrics.back();
    }
  } else {
    in.down_reason = state.status().message();
  }
  nlohmann::ordered_json snap = builder_.Build(in);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ++ticks_;
  last_tick_ms_ = ms;
  snap["collector"] = {{"ticks", ticks_.load()},
                       {"tick_ms", ms},
                       {"ssh_bytes_sent", transport_.bytes_sent()},
                       {"ssh_bytes_received", transport_.bytes_received()}};
  std::vector<nlohmann::ordered_json> events;
  if (!previous_.is_null()) events = DiffEvents(previous_, snap);
  previous_ = snap;
  {
    std::lock_guard lock(mu_);
    events.insert(events.end(), preflight_events_.begin(), preflight_events_.end());
    preflight_events_.clear();
  }
  history_.Add(std::move(snap), std::move(engine_metrics), std::move(events));
}

CollectorCost Collector::cost() const {
  return {ticks_.load(), transport_.bytes_sent(), transport_.bytes_received(),
          last_tick_ms_.load()};
}

}  // namespace spark::dashboard
