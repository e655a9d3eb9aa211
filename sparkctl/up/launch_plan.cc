// The launch plan: engine command lines, environment and the start/stop shell text per rank.
#include "sparkctl/up/launch_plan.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "sparkctl/fabric/node_state.h"
#include "sparkctl/profile/profile_json.h"
#include "sparkctl/ssh/transport.h"

namespace spark::up {
namespace {

using ssh::ShellQuote;

// Ranked nodes in rank order; FailedPrecondition when any node lacks a rank.
Result<std::vector<const netplan::NodeSpec*>> RankedNodes(const netplan::ClusterSpec& cluster) {
  std::vector<const netplan::NodeSpec*> nodes;
  for (const auto& n : cluster.nodes) {
    if (!n.rank) {
      return FailedPreconditionError("cluster.yaml: node " + n.name +
                                     " has no rank: run `sparkctl discover -c FILE` first");
    }
    nodes.push_back(&n);
  }
  std::sort(nodes.begin(), nodes.end(), [](auto* a, auto* b) { return *a->rank < *b->rank; });
  return nodes;
}

std::vector<netplan::EnvVar> MergeEnv(const std::vector<netplan::EnvVar>& nccl,
                                      const std::map<std::string, std::string>& profile_env) {
  std::vector<netplan::EnvVar> env;
  for (const auto& e : nccl) {
    if (!profile_env.count(e.name)) env.push_back(e);
  }
  for (const auto& [k, v] : profile_env) env.push_back({k, v});
  return env;
}

std::vector<std::string> EngineArgv(const profile::Profile& p, const LaunchOptions& o,
                                    const std::string& master, int rank, const std::string& status) {
  std::vector<std::string> a = {o.engine_path,  "serve",
                                "--model",      p.model.path,
                                "--tp",         std::to_string(p.engine.tp),
                                "--rank",       std::to_string(rank),
                                "--master-addr", master,
                                "--master-port", std::to_string(o.master_port),
                                "--host",       p.api.bind,
                                "--port",       std::to_string(p.api.port),
                                "--served-model-name", p.model.served_name,
                                "--max-model-len", std::to_string(p.engine.context_length),
                                "--max-num-seqs", std::to_string(p.engine.max_running_requests)};
  const profile::EngineSpec& e = p.engine;
  if (e.kv_cache.tokens) {
    const int64_t block = 16;
    a.insert(a.end(), {"--num-kv-blocks", std::to_string((*e.kv_cache.tokens + block - 1) / block)});
  }
  if (e.kv_cache.memory_fraction) {
    a.insert(a.end(), {"--kv-memory-fraction", FormatNumber(*e.kv_cache.memory_fraction)});
  }
  if (e.backend != "auto") a.insert(a.end(), {"--backend", e.backend});
  if (e.weight_dtype != "auto") a.insert(a.end(), {"--weight-dtype", e.weight_dtype});
  // Types the engine does not keep (fp8) are refused by name there and by `profile check`.
  if (e.kv_cache.dtype != profile::KvCacheDtype::kAuto) {
    a.insert(a.end(), {"--kv-dtype", std::string(profile::KvCacheDtypeName(e.kv_cache.dtype))});
  }
  if (e.cuda_graphs) a.push_back(*e.cuda_graphs ? "--cuda-graphs" : "--no-cuda-graphs");
  if (e.chunked_prefill == 0) {
    a.push_back("--no-chunked-prefill");
  } else {
    a.insert(a.end(), {"--max-batched-tokens", std::to_string(e.chunked_prefill)});
  }
  if (!e.prefix_caching) a.push_back("--no-prefix-caching");
  if (e.speculative.method == "ngram") {
    a.insert(a.end(), {"--speculative-method", e.speculative.method, "--num-speculative-tokens",
                       std::to_string(e.speculative.num_speculative_tokens), "--prompt-lookup-max",
                       std::to_string(e.speculative.prompt_lookup_max.value_or(4)),
                       "--prompt-lookup-min",
                       std::to_string(e.speculative.prompt_lookup_min.value_or(1))});
  } else if (e.speculative.method == "dspark") {
    a.insert(a.end(), {"--speculative-method", e.speculative.method, "--num-speculative-tokens",
                       std::to_string(e.speculative.num_speculative_tokens)});
  }
  if (!e.reasoning_parser.empty()) a.insert(a.end(), {"--reasoning-parser", e.reasoning_parser});
  if (!e.tool_parser.empty()) a.insert(a.end(), {"--tool-parser", e.tool_parser});
  if (!p.api.key_file.empty()) a.insert(a.end(), {"--api-key-file", p.api.key_file});
  if (p.api.tls.enabled()) {
    a.insert(a.end(), {"--ssl-certfile", p.api.tls.cert, "--ssl-keyfile", p.api.tls.key});
    if (!p.api.tls.ca.empty()) a.insert(a.end(), {"--ssl-ca-certs", p.api.tls.ca});
  }
  const profile::LimitsSpec defaults;
  if (p.api.limits.max_connections != defaults.max_connections) {
    a.insert(a.end(), {"--max-connections", std::to_string(p.api.limits.max_connections)});
  }
  if (p.api.limits.max_connections_per_peer != defaults.max_connections_per_peer) {
    a.insert(a.end(), {"--max-connections-per-peer",
                       std::to_string(p.api.limits.max_connections_per_peer)});
  }
  if (p.api.limits.max_requests_per_peer != defaults.max_requests_per_peer) {
    a.insert(a.end(), {"--max-requests-per-peer",
                       std::to_string(p.api.limits.max_requests_per_peer)});
  }
  a.insert(a.end(), {"--memory-floor-gib", FormatNumber(e.memory_guard.startup_floor_gib),
                     "--admit-floor-gib", FormatNumber(e.memory_guard.admit_floor_gib),
                     "--hard-floor-gib", FormatNumber(e.memory_guard.hard_floor_gib)});
  if (p.topology.gpus_per_node > 1) {
    a.insert(a.end(), {"--ranks-per-node", std::to_string(p.topology.gpus_per_node)});
  }
  if (p.api.default_max_tokens > 0) {
    a.insert(a.end(), {"--default-max-tokens", std::to_string(p.api.default_max_tokens)});
  }
  if (p.api.max_tokens_limit > 0) {
    a.insert(a.end(), {"--max-tokens-limit", std::to_string(p.api.max_tokens_limit)});
  }
  a.insert(a.end(), {"--status-file", status});
  return a;
}

// engine.collectives: the threshold and wire from the profile, the links from the fabric plan.
Status AppendOneShotArgs(const profile::Profile& p, const LaunchOptions& o,
                         const std::string& node, std::vector<std::string>* argv) {
  const profile::CollectivesSpec& c = p.engine.collectives;
  if (c.oneshot_max_bytes <= 0) return Status::Ok();
  auto links = o.oneshot_links.find(node);
  if (links == o.oneshot_links.end() && o.links_pending) return Status::Ok();
  if (links == o.oneshot_links.end()) {
    return FailedPreconditionError("profile " + p.source_file +
                                   ": engine.collectives.oneshot_max_bytes needs the fabric plan's "
                                   "one-shot links, and " + node +
                                   " has none (run `sparkctl net apply`)");
  }
  const netplan::OneShotLinks& l = links->second;
  argv->insert(argv->end(), {"--oneshot-max-bytes", std::to_string(c.oneshot_max_bytes),
                             "--oneshot-wire", c.wire, "--oneshot-topology", l.topology,
                             "--oneshot-addr", l.AddressesFlag()});
  if (c.wire == "rdma") {
    argv->insert(argv->end(), {"--oneshot-rails", l.RailsFlag()});
    // The same lossless class as NCCL's queue pairs, where the fabric plan sets one.
    auto env = o.nccl_env.find(node);
    if (env != o.nccl_env.end()) {
      for (const netplan::EnvVar& e : env->second) {
        if (e.name == "NCCL_IB_TC") argv->insert(argv->end(), {"--oneshot-traffic-class", e.value});
      }
    }
  }
  return Status::Ok();
}

std::string Hash(const profile::Profile& p, const std::vector<RankLaunch>& ranks,
                 const LaunchOptions& o) {
  nlohmann::ordered_json j = profile::ToJson(p);
  j.erase("source_file");
  nlohmann::ordered_json r = nlohmann::ordered_json::array();
  for (const auto& rank : ranks) {
    nlohmann::ordered_json env = nlohmann::ordered_json::array();
    for (const auto& e : rank.env) env.push_back(e.name + "=" + e.value);
    r.push_back({{"node", rank.node}, {"address", rank.address}, {"argv", rank.argv}, {"env", env}});
  }
  nlohmann::ordered_json all = {
      {"profile", j}, {"ranks", r}, {"engine", o.engine_sha256}, {"deadline", o.stop_deadline_s}};
  return fabric::Sha256Hex(all.dump());
}

}  // namespace

std::string SafeName(std::string_view name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  return out.empty() ? "cluster" : out;
}

Result<LaunchPlan> PlanLaunch(const profile::Profile& profile, const netplan::ClusterSpec& cluster,
                              const LaunchOptions& options) {
  SPARK_ASSIGN_OR_RETURN(auto nodes, RankedNodes(cluster));
  const int want = profile.topology.nodes;
  if (static_cast<int>(nodes.size()) < want) {
    return FailedPreconditionError("profile " + profile.source_file + " needs " +
                                   std::to_string(want) + " nodes; the inventory has " +
                                   std::to_string(nodes.size()));
  }
  const int gpus = want * profile.topology.gpus_per_node;
  if (profile.engine.tp != gpus || profile.topology.gpus_per_node != 1) {
    return InvalidArgumentError("profile " + profile.source_file + ": engine.tp " +
                                std::to_string(profile.engine.tp) +
                                " must equal topology.nodes (one rank per node, one GPU each)");
  }
  // ngram and dspark run; Validate and `profile check` refuse the rest by name too.
  const std::string& method = profile.engine.speculative.method;
  if (method != "none" && method != "ngram" && method != "dspark") {
    return InvalidArgumentError("profile " + profile.source_file + ": engine.speculative.method " +
                                method + ": not implemented in spark-engine; use method: dspark, "
                                "ngram (prompt lookup) or none");
  }
  LaunchPlan plan;
  plan.cluster = SafeName(cluster.name);
  plan.served_name = profile.model.served_name;
  plan.api_node = nodes[0]->name;
  plan.api_key_file = profile.api.key_file;
  plan.memlock = profile.host.memlock;
  plan.stop_deadline_s = options.stop_deadline_s;
  const std::string host =
      profile.api.bind == "0.0.0.0" || profile.api.bind == "::" ? "127.0.0.1" : profile.api.bind;
  plan.endpoint = std::string(profile.api.tls.enabled() ? "https://" : "http://") + host + ":" +
                  std::to_string(profile.api.port);
  plan.tls_cert = profile.api.tls.cert;
  const bool wildcard = profile.api.bind == "0.0.0.0" || profile.api.bind == "::";
  plan.advertised_host = wildcard ? nodes[0]->address : profile.api.bind;
  const std::string& bind = profile.api.bind;
  const bool loopback = bind == "localhost" || bind == "::1" || bind.starts_with("127.");
  plan.clear_text = !profile.api.tls.enabled() && !loopback;
  const std::string run_dir = std::string(kNodeRunDir) + "/" + plan.cluster;
  for (int r = 0; r < want; ++r) {
    RankLaunch rank;
    rank.rank = r;
    rank.node = nodes[r]->name;
    rank.address = nodes[r]->address;
    const std::string base = "rank" + std::to_string(r);
    rank.status_path = run_dir + "/" + base + ".json";
    rank.pid_path = run_dir + "/" + base + ".pid";
    rank.log_path = std::string(kNodeLogDir) + "/" + plan.cluster + "-" + base + ".log";
    rank.unit = "sparkctl-" + plan.cluster + "-" + base;
    auto control = options.control_addresses.find(rank.node);
    rank.control_address =
        control == options.control_addresses.end() ? rank.address : control->second;
    auto master = options.control_addresses.find(nodes[0]->name);
    rank.argv = EngineArgv(profile, options,
                           master == options.control_addresses.end() ? nodes[0]->address
                                                                     : master->second,
                           r, rank.status_path);
    SPARK_RETURN_IF_ERROR(AppendOneShotArgs(profile, options, rank.node, &rank.argv));
    auto nccl = options.nccl_env.find(rank.node);
    std::vector<netplan::EnvVar> nccl_env =
        nccl == options.nccl_env.end() ? std::vector<netplan::EnvVar>{} : nccl->second;
    const bool has_plugin = std::any_of(nccl_env.begin(), nccl_env.end(), [](const auto& e) {
      return e.name == "NCCL_TUNER_PLUGIN";
    });
    if (!nccl_env.empty() && !has_plugin && !options.nccl_tuner_plugin.empty()) {
      nccl_env.push_back({"NCCL_TUNER_PLUGIN", options.nccl_tuner_plugin});
    }
    rank.env = MergeEnv(nccl_env, profile.env);
    plan.ranks.push_back(std::move(rank));
  }
  plan.hash = Hash(profile, plan.ranks, options);
  return plan;
}

namespace {

std::string Argv(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + ShellQuote(a);
  return s;
}

std::string Dirs(const RankLaunch& r) {
  return "mkdir -p " + ShellQuote(r.status_path.substr(0, r.status_path.rfind('/'))) + " " +
         ShellQuote(kNodeLogDir) + " && rm -f " + ShellQuote(r.status_path) + " " +
         ShellQuote(r.pid_path) + " && ";
}

}  // namespace

std::string StartCommand(const LaunchPlan& plan, const RankLaunch& r, bool systemd) {
  const std::string log = ShellQuote(r.log_path);
  const std::string pid = ShellQuote(r.pid_path);
  std::string cmd = Dirs(r) + "printf '%s sparkctl: starting rank " + std::to_string(r.rank) +
                    "\\n' \"[$(date '+%F %T.000')]\" >> " + log + " && ";
  if (systemd) {
    std::string props = " --collect --quiet --property=LimitMEMLOCK=" +
                        std::string(plan.memlock == "unlimited" ? "infinity"
                                                                : plan.memlock + "K") +
                        " --property=StandardOutput=append:" + r.log_path +
                        " --property=StandardError=append:" + r.log_path +
                        " --property=TimeoutStopSec=" + std::to_string(plan.stop_deadline_s);
    for (const auto& e : r.env) props += " --setenv=" + ShellQuote(e.name + "=" + e.value);
    cmd += "systemctl reset-failed " + r.unit + " 2>/dev/null; systemd-run --unit=" + r.unit +
           props + " " + Argv(r.argv) + " && systemctl show -p MainPID --value " + r.unit +
           " > " + pid;
    return cmd;
  }
  // setsid -f: a new session, detached from the SSH channel; the shell writes its own pid and
  // then becomes the engine (exec), so the pidfile names the engine itself.
  std::string env = "env -u SPARKCTL_RUN_ID";
  for (const auto& e : r.env) env += " " + ShellQuote(e.name + "=" + e.value);
  const std::string limit = plan.memlock == "unlimited" ? "unlimited" : plan.memlock;
  const std::string inner = "echo $$ > " + pid + "; exec " + Argv(r.argv);
  cmd += "(ulimit -l " + limit + " 2>/dev/null || echo \"sparkctl: memlock stays $(ulimit -l), "
         "wanted " + limit + "\" >> " + log + "; cd / && " + env + " setsid -f sh -c " +
         ShellQuote(inner) + " < /dev/null >> " + log + " 2>&1)" +
         " && i=0; while [ ! -s " + pid + " ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done;"
         " test -s " + pid;
  return cmd;
}

std::string StopCommand(const LaunchPlan& plan, const RankLaunch& r) {
  const std::string pid = ShellQuote(r.pid_path);
  const int ticks = plan.stop_deadline_s * 10;
  // A pid is ours only while its command line still names this rank's status file.
  return "systemctl stop " + r.unit + " 2>/dev/null; "
         "p=$(cat " + pid + " 2>/dev/null); "
         "alive() { [ -n \"$p\" ] && [ -r /proc/$p/cmdline ] && "
         "tr '\\0' ' ' < /proc/$p/cmdline | grep -qF -- " + ShellQuote(r.status_path) +
         " && ! sed 's/.*) //' /proc/$p/stat | grep -q '^Z'; }; "
         "if alive; then kill -TERM $p; kill -CONT $p 2>/dev/null; i=0; "
         "while alive && [ $i -lt " + std::to_string(ticks) + " ]; do sleep 0.1; i=$((i+1)); done; "
         "if alive; then kill -KILL $p; echo killed $p; else echo stopped $p; fi; "
         "else echo not running; fi; rm -f " + pid;
}

}  // namespace spark::up
