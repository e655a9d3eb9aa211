#include "sparkctl/weights/sync.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "netplan/address_plan.h"
#include "sparkctl/profile/profile_yaml.h"
#include "sparkctl/ssh/parallel.h"
#include "sparkctl/bundle/deploy.h"
#include "sparkctl/weights/atomic_file.h"

namespace spark::weights {
namespace {

using Clock = std::chrono::steady_clock;

Result<Manifest> ParseManifestText(const std::string& text, const std::string& source) {
  return DetectManifestFormat(text) == ManifestFormat::kJson ? ParseManifestJson(text, source)
                                                             : ParseSha256Sums(text, source);
}

// An id for this sync's file names (server logs); unrelated to the key.
std::string RandomSession() { return NewSyncKey().substr(0, 16); }

// Free bytes at dir on every receiver vs what it will receive (statvfs through `stat -f`).
Status CheckDiskSpace(ssh::Transport& transport, const SyncPlan& plan, const std::string& dir) {
  std::vector<std::string> nodes;
  for (const auto& [node, bytes] : plan.bytes_in) nodes.push_back(node);
  auto results = ssh::ForEachNode<uint64_t>(nodes, [&](const std::string& node) -> Result<uint64_t> {
    std::string cmd = "stat -f -c '%a %S' " + ssh::ShellQuote(dir);
    SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r, ssh::RunChecked(transport, node, cmd));
    unsigned long long blocks = 0, block_size = 0;
    if (std::sscanf(r.stdout_data.c_str(), "%llu %llu", &blocks, &block_size) != 2) {
      return InternalError(node + ": cannot read free space of " + dir + ": " + r.stdout_data);
    }
    uint64_t avail = blocks * block_size;
    uint64_t need = plan.bytes_in.at(node);
    if (avail < need) {
      return ResourceExhaustedError(node + ": " + dir + " needs " + HumanBytes(need) +
                                    " for the missing files but only " + HumanBytes(avail) +
                                    " are free; free space there (nothing was copied)");
    }
    return avail;
  });
  return ssh::JoinNodeErrors(results);
}

// Who holds which file: the receivers' shared state while transfers run.
class Board {
 public:
  enum class Has { kPending, kYes, kFailed };

  void Set(const std::string& node, const std::string& file, Has has) {
    std::lock_guard<std::mutex> lock(mu_);
    state_[{node, file}] = has;
    changed_.notify_all();
  }
  Has Wait(const std::string& node, const std::string& file) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return Get(node, file) != Has::kPending; });
    return Get(node, file);
  }

 private:
  Has Get(const std::string& node, const std::string& file) const {
    auto it = state_.find({node, file});
    return it == state_.end() ? Has::kYes : it->second;  // not in the plan: held already
  }
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::pair<std::string, std::string>, Has> state_;
};

struct Run {
  ssh::Transport& transport;
  const std::map<std::string, std::string>& addresses;
  const std::map<std::string, std::string>& sparkctl;  // node -> remote binary
  const std::string& dir;
  const SyncOptions& options;
  std::string key;      // given to every serve and fetch on stdin, over SSH
  std::string session;  // names the servers' logs
  Board board;
  std::mutex mu;
  SyncReport* report;

  void Event(const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    if (options.on_event) options.on_event(line);
  }
  void Error(const std::string& message) {
    std::lock_guard<std::mutex> lock(mu);
    report->errors.push_back(message);
    if (options.on_event) options.on_event("ERROR: " + message);
  }
};

std::string FetchCommand(Run& run, const Transfer& t) {
  return ssh::ShellQuote(run.sparkctl.at(t.to)) + " weights pull-file --json --from " +
         ssh::ShellQuote(run.addresses.at(t.from) + ":" + std::to_string(run.options.port)) +
         " --key-file - --file " + ssh::ShellQuote(t.file) + " --dir " +
         ssh::ShellQuote(run.dir) + " --sha256 " + t.sha256 + " --size " +
         std::to_string(t.size) + " --connect-timeout-ms " +
         std::to_string(run.options.connect_timeout.count());
}

void DoTransfer(Run& run, const Transfer& t) {
  if (run.board.Wait(t.from, t.file) != Board::Has::kYes) {
    run.board.Set(t.to, t.file, Board::Has::kFailed);
    run.Error(t.to + ": " + t.file + ": not copied because " + t.from + " has no good copy of it "
              "(see its error above)");
    return;
  }
  ssh::RunOptions opts;
  opts.timeout = std::chrono::hours(12);
  opts.stdin_data = run.key + "\n";
  std::string cmd = FetchCommand(run, t);
  Result<ssh::CommandResult> r = run.transport.Run(t.to, cmd, opts);
  std::string why;
  if (!r.ok()) {
    why = r.status().message();
  } else if (!r->ok()) {
    why = ssh::Tail(r->stderr_data, 400);
    while (!why.empty() && why.back() == '\n') why.pop_back();
    if (why.empty()) why = "fetch exited with status " + std::to_string(r->exit_code);
  }
  if (!why.empty()) {
    run.board.Set(t.to, t.file, Board::Has::kFailed);
    run.Error(t.to + ": " + t.file + " from " + t.from + ": " + why);
    return;
  }
  double seconds = 0;
  uint64_t received = 0;
  try {
    auto j = nlohmann::json::parse(r->stdout_data);
    seconds = j.value("seconds", 0.0);
    received = j.value("bytes_received", uint64_t{0});
  } catch (const nlohmann::json::exception&) {
    // The file is in place (exit 0); only the numbers are lost.
  }
  {
    std::lock_guard<std::mutex> lock(run.mu);
    run.report->bytes_moved += received;
  }
  run.board.Set(t.to, t.file, Board::Has::kYes);
  char rate[64] = "";
  if (seconds > 0) std::snprintf(rate, sizeof rate, " in %.1f s, %s/s", seconds,
                                 HumanBytes(static_cast<uint64_t>(received / seconds)).c_str());
  run.Event(t.to + " <- " + t.from + ": " + t.file + " " + HumanBytes(received) + rate);
}

// Starts the node's file server detached (setsid, output to a log) and returns once it listens:
// the SSH transport runs one command per node at a time, so a server held in a running command
// would block that node's own fetches. A server that fails to start prints its log here.
Status StartServer(Run& run, const std::string& node) {
  std::string log = "/tmp/sparkctl-weights-serve." + run.session + ".log";
  std::string serve = ssh::ShellQuote(run.sparkctl.at(node)) + " weights serve --dir " +
                      ssh::ShellQuote(run.dir) + " --port " + std::to_string(run.options.port) +
                      " --key-file - --idle-exit 1800";
  // The key arrives on this command's stdin; an asynchronous command's stdin is /dev/null
  // unless redirected, hence fd 3. The server reads the key, then closes its stdin.
  std::string cmd = "exec 3<&0; setsid " + serve + " <&3 >/dev/null 2>" + log + " 3<&- & "
                    "pid=$!; exec 3<&-; "
                    "for i in $(seq 100); do "
                    "if ! kill -0 $pid 2>/dev/null; then cat " + log + " >&2; exit 1; fi; "
                    "if grep -q listening " + log + "; then exit 0; fi; sleep 0.1; done; "
                    "echo 'no answer after 10 s' >&2; exit 1";
  ssh::RunOptions opts;
  opts.stdin_data = run.key + "\n";
  Result<ssh::CommandResult> r = run.transport.Run(node, cmd, opts);
  if (!r.ok()) return r.status();
  if (!r->ok()) {
    return UnavailableError(node + ": file server did not start: " + ssh::Tail(r->stderr_data, 400));
  }
  return Status::Ok();
}

void StopServer(Run& run, const std::string& node) {
  std::string cmd = ssh::ShellQuote(run.sparkctl.at(node)) + " weights pull-file --quit --from " +
                    "127.0.0.1:" + std::to_string(run.options.port) + " --key-file -";
  ssh::RunOptions opts;
  opts.stdin_data = run.key + "\n";
  Result<ssh::CommandResult> r = run.transport.Run(node, cmd, opts);
  if (!r.ok() || !r->ok()) {
    run.Error(node + ": could not stop the file server (it exits by itself after 30 min idle)");
  }
}

Status Execute(Run& run, const SyncPlan& plan) {
  std::set<std::string> server_set;
  std::map<std::string, std::vector<const Transfer*>> by_receiver;
  for (const auto& t : plan.transfers) {
    server_set.insert(t.from);
    by_receiver[t.to].push_back(&t);
    run.board.Set(t.to, t.file, Board::Has::kPending);
  }
  std::vector<std::string> servers(server_set.begin(), server_set.end());
  auto started = ssh::ForEachNode<bool>(servers, [&](const std::string& node) -> Result<bool> {
    SPARK_RETURN_IF_ERROR(StartServer(run, node));
    return true;
  });
  Status start = ssh::JoinNodeErrors(started);
  if (start.ok()) {
    std::vector<std::thread> receivers;
    for (auto& [node, list] : by_receiver) {
      receivers.emplace_back([&run, list = list] {
        for (const Transfer* t : list) DoTransfer(run, *t);
      });
    }
    for (auto& t : receivers) t.join();
  }
  for (size_t i = 0; i < servers.size(); ++i) {
    if (started[i].ok()) StopServer(run, servers[i]);
  }
  return start;
}

}  // namespace

Result<std::map<std::string, std::string>> NodeSparkctlPaths(ssh::Transport& transport,
                                                           const std::vector<std::string>& nodes,
                                                           const std::string& given) {
  auto paths = ssh::ForEachNode<std::string>(
      nodes, [&](const std::string& node) -> Result<std::string> {
    if (!given.empty()) return given;
    SPARK_ASSIGN_OR_RETURN(auto f, bundle::EnsureProgram(transport, bundle::DefaultCatalog(), node,
                                                         "sparkctl"));
    return f.path;
  });
  SPARK_RETURN_IF_ERROR(ssh::JoinNodeErrors(paths));
  std::map<std::string, std::string> out;
  for (size_t i = 0; i < nodes.size(); ++i) out[nodes[i]] = *paths[i];
  return out;
}

Result<SyncPlan> PlanSync(const Manifest& manifest, const ClusterVerifyReport& before) {
  SyncPlan plan;
  std::vector<std::string> unreachable;
  for (const auto& n : before.nodes) {
    plan.ring.push_back(n.node);
    if (!n.status.ok()) unreachable.push_back(n.status.message());
  }
  if (!unreachable.empty()) {
    return FailedPreconditionError("sync needs every node; these could not be checked:\n  " +
                                   Join(unreachable, "\n  "));
  }
  const size_t n = before.nodes.size();
  std::vector<std::string> lost;
  for (const auto& entry : manifest.files) {
    std::vector<bool> good(n, false);
    for (size_t i = 0; i < n; ++i) {
      for (const auto& f : before.nodes[i].report.files) {
        if (f.path == entry.path && f.state == FileState::kOk) good[i] = true;
      }
    }
    size_t source = std::find(good.begin(), good.end(), true) - good.begin();
    if (source == n) {
      lost.push_back(entry.path);
      continue;
    }
    uint64_t size = entry.size.value_or(0);
    for (size_t k = 1; k < n; ++k) {
      size_t i = (source + k) % n;
      if (good[i]) continue;
      plan.transfers.push_back({.file = entry.path, .size = size, .sha256 = entry.sha256,
                                .from = plan.ring[(i + n - 1) % n], .to = plan.ring[i]});
      plan.bytes_in[plan.ring[i]] += size;
      plan.bytes_total += size;
    }
  }
  if (!lost.empty()) {
    return FailedPreconditionError(
        "no node holds a verified copy of " + std::to_string(lost.size()) + " file(s): " +
        Join(lost, ", ") + "; download them on one node (`sparkctl weights fetch -p PROFILE`, or "
        "hf download " +
        manifest.repository + " --revision " + manifest.revision + " --local-dir " + before.dir +
        " there), then run sync again");
  }
  return plan;
}

Result<SyncReport> SyncNodes(ssh::Transport& transport, const std::vector<std::string>& ring,
                             const std::map<std::string, std::string>& addresses,
                             const std::string& manifest_path, const std::string& manifest_text,
                             const std::string& dir, const SyncOptions& options) {
  auto started = Clock::now();
  SPARK_ASSIGN_OR_RETURN(Manifest manifest, ParseManifestText(manifest_text, manifest_path));
  for (const auto& f : manifest.files) {
    if (!f.size) {
      return InvalidArgumentError(manifest_path + ": sync needs file sizes; use a JSON manifest "
                                  "(a SHA256SUMS file has none)");
    }
  }
  SPARK_ASSIGN_OR_RETURN(auto sparkctl, NodeSparkctlPaths(transport, ring, options.sparkctl_path));
  // Extras are reported by `verify`, never deleted or copied by sync.
  ClusterVerifyOptions verify{.sparkctl_path = options.sparkctl_path, .allow_extra = true,
                              .create_dir = true};
  SPARK_ASSIGN_OR_RETURN(ClusterVerifyReport before,
                         VerifyNodes(transport, ring, manifest_path, manifest_text, dir, verify));
  SyncReport report;
  SPARK_ASSIGN_OR_RETURN(report.plan, PlanSync(manifest, before));
  if (options.on_event) {
    options.on_event("plan: " + std::to_string(report.plan.transfers.size()) + " transfer(s), " +
                     HumanBytes(report.plan.bytes_total) + " over all hops");
  }
  if (options.plan_only || report.plan.transfers.empty()) {
    report.after = options.plan_only ? ClusterVerifyReport{} : before;
    return report;
  }
  for (const auto& t : report.plan.transfers) {
    if (!addresses.count(t.from)) return InvalidArgumentError(t.from + ": no address known");
  }
  SPARK_RETURN_IF_ERROR(CheckDiskSpace(transport, report.plan, dir));
  Run run{.transport = transport, .addresses = addresses, .sparkctl = sparkctl, .dir = dir,
          .options = options, .key = NewSyncKey(), .session = RandomSession(),
          .report = &report};
  for (const auto& t : report.plan.transfers) {
    report.addresses[t.from] = addresses.at(t.from) + ":" + std::to_string(options.port);
  }
  SPARK_RETURN_IF_ERROR(Execute(run, report.plan));
  verify.create_dir = false;
  SPARK_ASSIGN_OR_RETURN(report.after,
                         VerifyNodes(transport, ring, manifest_path, manifest_text, dir, verify));
  report.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return report;
}

std::map<std::string, std::string> FabricSyncAddresses(const netplan::ClusterSpec& cluster,
                                                       std::string* why) {
  Result<netplan::AddressPlan> plan = netplan::BuildAddressPlan(cluster);
  if (!plan.ok()) {
    *why = "no fabric plan (" + plan.status().message() + ")";
    return {};
  }
  std::map<std::string, std::string> out;
  const auto& nodes = plan->nodes;  // by rank, as RingOrder
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int successor = nodes[(i + 1) % nodes.size()].rank;
    const netplan::FabricInterface* pick = nullptr;
    for (const auto& f : nodes[i].interfaces) {
      if (f.peer_rank == successor && (!pick || f.twin < pick->twin)) pick = &f;
    }
    if (!pick && !nodes[i].interfaces.empty()) pick = &nodes[i].interfaces.front();
    if (pick) out[nodes[i].name] = pick->address.ip.ToString();
  }
  return out;
}

namespace {

// Management addresses, replaced by the fabric address of every source whose successor reaches
// it. Each source that stays on the management LAN adds a warning.
std::map<std::string, std::string> SyncAddresses(ssh::Transport& transport,
                                                 const netplan::ClusterSpec& cluster,
                                                 std::vector<std::string>* warnings) {
  std::map<std::string, std::string> addresses;
  for (const auto& n : cluster.nodes) addresses[n.name] = n.address;
  std::string why;
  std::map<std::string, std::string> fabric = FabricSyncAddresses(cluster, &why);
  if (fabric.empty()) {
    warnings->push_back("weights go over the management LAN: " + why +
                        "; run `sparkctl discover` and `sparkctl net apply` for the fabric");
    return addresses;
  }
  const std::vector<std::string> ring = RingOrder(cluster);
  std::vector<std::string> receivers;
  for (size_t i = 0; i < ring.size(); ++i) receivers.push_back(ring[(i + 1) % ring.size()]);
  auto reached = ssh::ForEachNode<bool>(receivers, [&](const std::string& to) -> Result<bool> {
    size_t i = std::find(receivers.begin(), receivers.end(), to) - receivers.begin();
    auto it = fabric.find(ring[i]);
    if (it == fabric.end()) return false;
    SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r,
                           transport.Run(to, "ping -n -q -c 2 -i 0.2 -W 1 " + it->second));
    return r.ok();
  });
  for (size_t i = 0; i < ring.size(); ++i) {
    auto it = fabric.find(ring[i]);
    if (reached[i].ok() && *reached[i] && it != fabric.end()) {
      addresses[ring[i]] = it->second;
      continue;
    }
    warnings->push_back(
        ring[i] + " serves " + receivers[i] + " over the management LAN: " +
        (it == fabric.end() ? "it has no fabric address"
                            : receivers[i] + " cannot reach its fabric address " + it->second +
                                  (reached[i].ok() ? "" : " (" + reached[i].status().message() +
                                                              ")")) +
        "; check the fabric with `sparkctl net verify`");
  }
  return addresses;
}

}  // namespace

Result<SyncReport> SyncOnAllNodes(ssh::Transport& transport, const netplan::ClusterSpec& cluster,
                                  const profile::Profile& profile, const SyncOptions& options) {
  std::string path = profile::ResolvedManifestPath(profile);
  if (path.empty()) {
    return FailedPreconditionError(profile.source_file + ": model.manifest is not set");
  }
  Result<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status().WithContext(profile.source_file + ": model.manifest");
  return SyncManifestOnAllNodes(transport, cluster, profile.model.path, path, *text, options);
}

Result<SyncReport> SyncManifestOnAllNodes(ssh::Transport& transport,
                                          const netplan::ClusterSpec& cluster,
                                          const std::string& dir, const std::string& manifest_path,
                                          const std::string& manifest_text,
                                          const SyncOptions& options) {
  std::vector<std::string> warnings;
  std::map<std::string, std::string> addresses = SyncAddresses(transport, cluster, &warnings);
  for (const auto& w : warnings) {
    if (options.on_event) options.on_event("warning: " + w);
  }
  Result<SyncReport> report = SyncNodes(transport, RingOrder(cluster), addresses, manifest_path,
                                        manifest_text, dir, options);
  if (report.ok()) report->warnings = std::move(warnings);
  return report;
}

}  // namespace spark::weights
