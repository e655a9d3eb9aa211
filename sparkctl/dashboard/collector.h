// The dashboard's one collector: every interval it loads the state `up` recorded, probes every
// node with `status`'s own probe (up::ProbeNodes, one SSH round trip per node, rank 0's node also
// reading /ready and one /metrics body), judges with up::Assess, builds the snapshot and the
// events, and adds them to the History, which pushes them to the pages. It also counts its own
// cost: the bytes of the probe commands and their answers, and the time a tick takes. With a
// preflight function it also runs preflight's checks on a thread of their own, every
// preflight_interval (heavier than a tick: facts from every node), and puts what changed in
// their findings (a check turning warn or fail, or passing again) in the next tick's events.
// Thread-safety: Start/Stop from one thread; Tick runs on the collector thread (or the caller's
// in tests); cost() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "sparkctl/dashboard/history.h"
#include "sparkctl/dashboard/snapshot.h"
#include "sparkctl/host/checks.h"
#include "sparkctl/ssh/transport.h"

namespace spark::dashboard {

// A Transport that forwards to another and counts the bytes of commands and their output.
class CountingTransport final : public ssh::Transport {
 public:
  explicit CountingTransport(ssh::Transport& inner) : inner_(inner) {}
  Result<ssh::CommandResult> Run(const std::string& node, const std::string& command,
                                 const ssh::RunOptions& options) override;
  Status Upload(const std::string& node, const std::string& local_path,
                const std::string& remote_path, int mode) override;
  Status WriteFile(const std::string& node, const std::string& remote_path,
                   std::string_view contents, int mode) override;
  Result<std::string> ReadFile(const std::string& node, const std::string& path) override;
  using Transport::Run;
  uint64_t bytes_sent() const { return sent_; }
  uint64_t bytes_received() const { return received_; }

 private:
  ssh::Transport& inner_;
  std::atomic<uint64_t> sent_{0}, received_{0};
};

struct CollectorOptions {
  std::chrono::milliseconds interval{1000};
  std::chrono::milliseconds probe_timeout{5000};  // per node and tick
  double metrics_window_s = 60;                   // percentiles and ratios over this window
  // Preflight's checks on every node (sparkctl preflight's, without the link beacons); null:
  // none. Called from the collector's preflight thread.
  std::function<std::vector<host::CheckResult>()> preflight;
  std::chrono::milliseconds preflight_interval{60000};
};

struct CollectorCost {
  uint64_t ticks = 0;
  uint64_t bytes_sent = 0, bytes_received = 0;  // over SSH, payload only, since start
  double last_tick_ms = 0;
};

class Collector {
 public:
  Collector(ssh::Transport& transport, std::string state_dir, History& history,
            CollectorOptions options = {});
  ~Collector();  // Stops.

  void Start();  // a thread that ticks every interval (and one for preflight, when set)
  void Stop();
  // One tick now (the thread calls this). Never fails: an unreadable state or node is part
  // of the snapshot.
  void Tick();
  // One preflight pass now (its thread calls this): its changes wait for the next tick.
  void Preflight();
  CollectorCost cost() const;

 private:
  CountingTransport transport_;
  const std::string state_dir_;
  History& history_;
  const CollectorOptions options_;
  SnapshotBuilder builder_;
  nlohmann::ordered_json previous_;
  std::thread thread_, preflight_thread_;
  std::mutex mu_;
  // Preflight's last findings that were not ok, by "ID node", and the events of the passes
  // since the last tick (under mu_).
  std::map<std::string, host::CheckResult> findings_;
  std::vector<nlohmann::ordered_json> preflight_events_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<uint64_t> ticks_{0};
  std::atomic<double> last_tick_ms_{0};
};

}  // namespace spark::dashboard
