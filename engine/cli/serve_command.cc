// `spark-engine serve`: the OpenAI-compatible server (engine/server) over the scheduler and a
// model, one process per tensor-parallel rank (rank start-up shared with `generate`, see
// rank_launch.h).
//
// With --rank R this process is rank R of --tp N: rank 0 serves the rendezvous, loads its
// shards, runs a warm-up generation through every rank and serves HTTP; ranks > 0 load their
// shards and run rank 0's plans until it shuts the group down (exit 0) or the group breaks
// (exit 2, naming the rank and the peer). With --tp N and no --rank, this process is rank 0 and
// starts ranks 1..N-1 as its children (/proc/self/exe ... --rank r, a free loopback port); when
// one of them ends, /ready answers 503 naming it, and after --failure-grace the server drains and
// exits 2: a rank cannot rejoin, the supervisor restarts the whole model.
// SIGTERM/SIGINT on rank 0: stop accepting, let running requests finish (--drain-timeout), shut
// the workers down, exit 0. On a worker: exit at once. --status-file: see rank_status.h.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <future>
#include <optional>
#include <thread>

#include "base/logging.h"
#include "base/strings.h"
#include "engine/cli/engine_command.h"
#include "engine/cli/backend_flags.h"
#include "engine/cli/speculative_flags.h"
#include "engine/cli/rank_launch.h"
#include "engine/cli/rank_status_file.h"
#include "engine/cli/serve_control.h"
#include "engine/config/environment.h"
#include "engine/model/memory_plan.h"
#include "engine/model/model_family.h"
#include "engine/runtime/engine.h"
#include "engine/server/engine_service.h"
#include "engine/server/openai_server.h"

namespace spark::engine {
namespace {

using cli::RankPhase;

struct ServeOptions {
  std::string model_dir;
  std::string tokenizer_dir;  // Default: the model directory.
  std::string chat_format;    // Default: detected from the chat template.
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key_file;
  // TLS (vLLM's flag names): all empty = plain HTTP.
  std::string ssl_certfile, ssl_keyfile, ssl_ca_certs;
  // Per-client limits (peer_table.h).
  int max_connections = 1024;
  int max_connections_per_peer = 256;
  int max_requests_per_peer = 128;
  std::string served_model_name;  // Default: the model directory's name.
  // Ranks and transport.
  int tp = 1;
  bool tp_given = false;
  int rank = -1;  // -1: rank 0, starting ranks 1..tp-1 as children
  bool rank_given = false;
  cli::BackendFlags compute;  // --backend, --weight-dtype, --cuda-graphs
  std::string master_addr = "127.0.0.1";
  bool master_addr_given = false;
  int master_port = 0;  // 0: a free loopback port (children) / 29500 (explicit --rank)
  int comm_timeout_s = 60;
  int threads = 0;
  std::string status_file;
  int failure_grace_s = 5;
  // Scheduling and KV cache.
  int max_model_len = 0;  // 0: the model's max_position_embeddings, at most 8192.
  int max_num_seqs = 64;
  // Tokens (prefill + decode) per step, so the prefill chunk; without chunked prefill at least
  // the max model length.
  int max_batched_tokens = 2048;
  bool max_batched_tokens_given = false;
  int num_kv_blocks = 0;  // 0: enough for max_num_seqs full-length sequences, at most 4096.
  int block_size = 16;
  // The KV cache from memory instead of --num-kv-blocks: this fraction of the memory the node
  // has free once the weights are loaded (0 = off; see kv_budget.h).
  double kv_memory_fraction = 0;
  bool no_chunked_prefill = false;
  bool no_prefix_caching = false;
  runtime::SpeculativeOptions speculative;  // --speculative-method ... (rank 0 drafts)
  // Parsers the profile expects; the engine parses with its chat format's markers, so each must
  // name that format ("" = whatever the format is).
  std::string reasoning_parser;
  std::string tool_parser;
  int max_pending = 256;
  int drain_timeout_s = 30;
  // Memory floors in GiB (memory_plan.h): < 0 = not given. None given: scaled to the node
  // (startup_memory.h ScaledFloors: a Spark's 5 / 3 / 1).
  double startup_floor_gib = -1, admit_floor_gib = -1, hard_floor_gib = -1;
  int ranks_per_node = 0;  // 0: --tp when this process starts the ranks, else 1
  // max_tokens of a request that gives none (0: the API's defaults), and the most one may ask for
  // (0: the context length).
  int default_max_tokens = 0;
  int max_tokens_limit = 0;
  std::string log_level = "info";  // a server logs its phases unless told otherwise
};

bool LaunchesChildren(const ServeOptions& o) { return o.tp > 1 && !o.rank_given; }

// The floors asked for: a Spark's, with the ones given replaced; nullopt when none is given.
std::optional<model::MemoryFloors> Floors(const ServeOptions& o) {
  if (o.startup_floor_gib < 0 && o.admit_floor_gib < 0 && o.hard_floor_gib < 0) {
    return std::nullopt;
  }
  model::MemoryFloors f;
  const auto bytes = [](double gib) { return static_cast<int64_t>(gib * model::kGiB); };
  if (o.startup_floor_gib >= 0) f.startup = bytes(o.startup_floor_gib);
  if (o.admit_floor_gib >= 0) f.admit = bytes(o.admit_floor_gib);
  if (o.hard_floor_gib >= 0) f.hard = bytes(o.hard_floor_gib);
  return f;
}

int RanksPerNode(const ServeOptions& o) {
  if (o.ranks_per_node > 0) return o.ranks_per_node;
  return LaunchesChildren(o) ? o.tp : 1;
}

Status ValidateFlags(const ServeOptions& o) {
  if (o.tp < 1) return InvalidArgumentError("--tp " + std::to_string(o.tp) + ": must be >= 1");
  if (o.rank_given && !o.tp_given) {
    return InvalidArgumentError("--rank " + std::to_string(o.rank) +
                                " needs --tp N, the number of ranks in the group (e.g. --tp 2 "
                                "--rank 1)");
  }
  if (o.rank_given && (o.rank < 0 || o.rank >= o.tp)) {
    return InvalidArgumentError("--rank " + std::to_string(o.rank) + " is outside [0, --tp " +
                                std::to_string(o.tp) + "): ranks are numbered from 0");
  }
  if (o.master_addr_given && !o.rank_given) {
    return InvalidArgumentError(
        "--master-addr needs --rank: without it serve starts its ranks on this machine and they "
        "meet on 127.0.0.1 (give --rank R on every machine of a multi-machine group)");
  }
  if (o.master_port < 0 || o.master_port > 65535) {
    return InvalidArgumentError("--master-port " + std::to_string(o.master_port) +
                                ": must be in [1, 65535] (0: pick a free one)");
  }
  if (o.comm_timeout_s < 1) return InvalidArgumentError("--comm-timeout must be >= 1 second");
  if (o.failure_grace_s < 0) return InvalidArgumentError("--failure-grace must be >= 0");
  if (o.drain_timeout_s < 0) return InvalidArgumentError("--drain-timeout must be >= 0");
  if (o.block_size < 1) return InvalidArgumentError("--block-size must be >= 1");
  if (o.max_num_seqs < 1) return InvalidArgumentError("--max-num-seqs must be >= 1");
  if (o.num_kv_blocks < 0) return InvalidArgumentError("--num-kv-blocks must be >= 1");
  if (o.kv_memory_fraction != 0 && !(o.kv_memory_fraction > 0 && o.kv_memory_fraction <= 0.9)) {
    return InvalidArgumentError("--kv-memory-fraction " + FormatNumber(o.kv_memory_fraction) +
                                ": must be in (0, 0.9]; unified memory wedges the host when "
                                "exhausted");
  }
  if (o.kv_memory_fraction > 0 && o.num_kv_blocks > 0) {
    return InvalidArgumentError(
        "--kv-memory-fraction and --num-kv-blocks both size the KV cache: give one");
  }
  if (o.max_batched_tokens < 1) return InvalidArgumentError("--max-batched-tokens must be >= 1");
  SPARK_RETURN_IF_ERROR(cli::ValidateSpeculativeFlags(o.speculative, o.model_dir));
  if (o.ranks_per_node < 0 || o.ranks_per_node > o.tp) {
    return InvalidArgumentError("--ranks-per-node " + std::to_string(o.ranks_per_node) +
                                ": must be in [1, --tp]");
  }
  if (std::optional<model::MemoryFloors> f = Floors(o)) SPARK_RETURN_IF_ERROR(f->Validate());
  if (o.default_max_tokens < 0) return InvalidArgumentError("--default-max-tokens must be >= 0");
  if (o.max_tokens_limit < 0) return InvalidArgumentError("--max-tokens-limit must be >= 0");
  if (o.max_tokens_limit > 0 && o.default_max_tokens > o.max_tokens_limit) {
    return InvalidArgumentError("--default-max-tokens " + std::to_string(o.default_max_tokens) +
                                " is above --max-tokens-limit " +
                                std::to_string(o.max_tokens_limit));
  }
  if (o.no_chunked_prefill && o.max_batched_tokens_given && o.max_model_len > 0 &&
      o.max_batched_tokens < o.max_model_len) {
    return InvalidArgumentError("--no-chunked-prefill: a whole prompt must fit one step, so "
                                "--max-batched-tokens (" + std::to_string(o.max_batched_tokens) +
                                ") must be >= --max-model-len (" + std::to_string(o.max_model_len) +
                                ")");
  }
  if (o.ssl_certfile.empty() != o.ssl_keyfile.empty()) {
    return InvalidArgumentError("--ssl-certfile and --ssl-keyfile go together: give both");
  }
  if (!o.ssl_ca_certs.empty() && o.ssl_certfile.empty()) {
    return InvalidArgumentError("--ssl-ca-certs needs --ssl-certfile and --ssl-keyfile");
  }
  if (o.max_connections < 1 || o.max_connections_per_peer < 1 || o.max_requests_per_peer < 1) {
    return InvalidArgumentError(
        "--max-connections, --max-connections-per-peer and --max-requests-per-peer must be >= 1");
  }
  // Before any weights load: an open endpoint needs a key.
  if (!server::IsLoopbackAddress(o.host) && o.api_key_file.empty()) {
    return FailedPreconditionError("--host " + o.host +
                                   " is not a loopback address: an API key is required "
                                   "(--api-key-file FILE)");
  }
  return Status::Ok();
}

// --status-file for rank `rank`: "{rank}" in the path becomes the rank; children started by
// this process write PATH.rank<r> when the path has no "{rank}".
std::string StatusPath(const ServeOptions& o, int rank) {
  std::string path = o.status_file;
  if (path.empty()) return path;
  const size_t at = path.find("{rank}");
  if (at != std::string::npos) return path.replace(at, 6, std::to_string(rank));
  if (LaunchesChildren(o) && rank > 0) path += ".rank" + std::to_string(rank);
  return path;
}

// Threads per rank: --threads is in all when this process starts the ranks, per rank with
// --rank (default: every core, shared by the local ranks).
int RankThreads(const ServeOptions& o) {
  const int total =
      o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
  return LaunchesChildren(o) ? std::max(1, total / o.tp) : std::max(1, total);
}

std::vector<std::string> ChildArgv(const ServeOptions& o, int rank, int port) {
  std::vector<std::string> a = {"/proc/self/exe", "--log-level",
                                o.log_level,      "serve",
                                "--model",        o.model_dir,
                                "--tp",           std::to_string(o.tp),
                                "--rank",         std::to_string(rank),
                                "--master-addr",  "127.0.0.1",
                                "--master-port",  std::to_string(port),
                                "--comm-timeout", std::to_string(o.comm_timeout_s),
                                "--threads",      std::to_string(RankThreads(o))};
  const std::vector<std::string> compute = cli::BackendArgv(o.compute);
  a.insert(a.end(), compute.begin(), compute.end());
  if (!o.tokenizer_dir.empty()) a.insert(a.end(), {"--tokenizer", o.tokenizer_dir});
  if (!o.status_file.empty()) a.insert(a.end(), {"--status-file", StatusPath(o, rank)});
  a.insert(a.end(), {"--ranks-per-node", std::to_string(RanksPerNode(o))});
  for (auto [flag, gib] : {std::pair{"--memory-floor-gib", o.startup_floor_gib},
                           std::pair{"--admit-floor-gib", o.admit_floor_gib},
                           std::pair{"--hard-floor-gib", o.hard_floor_gib}}) {
    if (gib >= 0) a.insert(a.end(), {flag, FormatNumber(gib)});
  }
  // Every rank holds its shard of a draft model (dspark) and drafts in lockstep; only rank 0
  // drafts otherwise.
  if (o.speculative.needs_draft_model()) {
    const std::vector<std::string> spec = cli::SpeculativeArgv(o.speculative);
    a.insert(a.end(), spec.begin(), spec.end());
  }
  return a;
}

// --max-model-len, else the model's, at most 8192 (0 when the config is unknown: a worker takes
// rank 0's).
int MaxModelLen(const ServeOptions& o, const core::ModelConfig* config) {
  if (o.max_model_len > 0) return o.max_model_len;
  return config ? std::min(8192, config->max_position_embeddings) : 0;
}

// Tokens per step: without chunked prefill a whole prompt runs in one step.
int StepTokens(const ServeOptions& o, int max_len) {
  return o.no_chunked_prefill && !o.max_batched_tokens_given
             ? std::max(o.max_batched_tokens, max_len)
             : o.max_batched_tokens;
}

cli::RankOptions MakeRankOptions(const ServeOptions& o, int rank, int port, int64_t blocks,
                                 const core::ModelConfig* config = nullptr) {
  cli::RankOptions r;
  r.model_dir = o.model_dir;
  r.tokenizer_dir = o.tokenizer_dir;
  cli::ApplyBackendFlags(o.compute, &r);
  r.tp = o.tp;
  r.rank = rank;
  r.master_addr = o.master_addr;
  r.master_port = port;
  r.comm_timeout = std::chrono::seconds(o.comm_timeout_s);
  r.threads = RankThreads(o);
  r.num_kv_blocks = blocks;
  r.kv_memory_fraction = rank == 0 ? o.kv_memory_fraction : 0;
  r.block_size = o.block_size;
  r.floors = Floors(o);
  r.max_model_len = MaxModelLen(o, config);
  r.max_num_seqs = o.max_num_seqs;
  r.max_batched_tokens = StepTokens(o, r.max_model_len);
  r.speculative_tokens = o.speculative.enabled() ? o.speculative.num_speculative_tokens : 0;
  r.load_draft = o.speculative.needs_draft_model();
  r.chunked_prefill = !o.no_chunked_prefill;
  r.ranks_on_host = RanksPerNode(o);
  if (Result<config::Environment> env = config::ReadEnvironment(); env.ok()) {
    r.test_step_delay = std::chrono::milliseconds(env->test_step_delay_ms);
  }
  return r;
}

Status RunWorkerRank(const ServeOptions& o, int rank, cli::RankStatus& status) {
  cli::RankOptions ro = MakeRankOptions(o, rank, o.master_port > 0 ? o.master_port : 29500, 0);
  ro.status = &status;
  Result<std::unique_ptr<cli::RankSession>> session = cli::StartRank(ro);
  if (!session.ok()) {
    const Status s = session.status().WithContext("rank " + std::to_string(rank));
    status.Set(RankPhase::kFailed, s.message()).IgnoreError();
    return s;
  }
  return (*session)->RunWorker();  // Reports ready, then stopped or failed.
}

Result<server::OpenAIServerOptions> ServerOptions(const ServeOptions& o) {
  server::OpenAIServerOptions s;
  s.http.host = o.host;
  s.http.port = o.port;
  s.http.limits.max_connections = o.max_connections;
  s.http.limits.max_connections_per_peer = o.max_connections_per_peer;
  s.http.limits.max_requests_per_peer = o.max_requests_per_peer;
  s.http.tls = {o.ssl_certfile, o.ssl_keyfile, o.ssl_ca_certs};
  if (s.http.tls.enabled()) {  // Read now, before any weights load; again when serving.
    SPARK_RETURN_IF_ERROR(server::MakeServerTlsContext(s.http.tls).status());
  }
  s.max_pending_sequences = o.max_pending;
  s.default_max_tokens = o.default_max_tokens;
  s.max_tokens_limit = o.max_tokens_limit;
  s.served_model_name =
      o.served_model_name.empty()
          ? std::filesystem::path(o.model_dir).lexically_normal().filename().string()
          : o.served_model_name;
  if (s.served_model_name.empty()) s.served_model_name = "model";
  if (!o.api_key_file.empty()) {
    SPARK_ASSIGN_OR_RETURN(s.api_keys, server::ApiKeys::FromFile(o.api_key_file));
  }
  return s;
}

// Polls the child ranks while rank 0 runs; any exit breaks the group.
class ChildWatch {
 public:
  ChildWatch(cli::LocalRanks* children, std::shared_ptr<cli::ServeControl> control)
      : children_(children), control_(std::move(control)) {
    if (children_) thread_ = std::thread([this] { Loop(); });
  }
  ~ChildWatch() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    while (!stop_) {
      Status s = children_->Poll(/*exit_zero_fails=*/true);
      if (!s.ok()) {
        s = UnavailableError("tensor-parallel " + s.message() +
                             "; the group cannot continue (restart the whole model)");
        // Before serving the main thread may sit in a collective until --comm-timeout.
        if (!control_->serving()) control_->ExitNow(RankPhase::kFailed, s.message(), kExitFailed);
        control_->Fail(s, /*names_rank=*/true);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  cli::LocalRanks* children_;
  std::shared_ptr<cli::ServeControl> control_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// One greedy token through the service, so through every rank's forward and collectives.
Status WarmUp(server::EngineService& service, const server::TextCodec& codec,
              std::chrono::seconds timeout) {
  server::GenerationRequest g;
  g.id = 0;
  g.prompt = codec.Encode("Hello", false);
  const int vocab = service.vocab_size();
  if (g.prompt.empty() ||
      std::any_of(g.prompt.begin(), g.prompt.end(), [vocab](int32_t t) { return t >= vocab; })) {
    g.prompt = {0};  // A tokenizer larger than the model (test checkpoints).
  }
  g.params.temperature = 0;
  g.params.max_tokens = 1;
  g.params.ignore_eos = true;
  auto done = std::make_shared<std::promise<Status>>();
  std::future<Status> result = done->get_future();
  SPARK_RETURN_IF_ERROR(service.Submit(std::move(g), [done](const server::GenerationEvent& e) {
    if (!e.finished) return;
    done->set_value(!e.error.ok() ? e.error
                    : e.has_token ? Status::Ok()
                                  : UnavailableError("the warm-up request ended without a token"));
  }));
  if (result.wait_for(timeout) != std::future_status::ready) {
    service.Cancel(0);
    return DeadlineExceededError("warm-up generation: no token within " +
                                 std::to_string(timeout.count()) + " s");
  }
  return result.get().WithContext("warm-up generation");
}

runtime::EngineOptions MakeEngineOptions(const ServeOptions& o, const core::ModelConfig& config,
                                         int max_len, int blocks) {
  runtime::EngineOptions eo;
  eo.argmax_plans = true;  // ModelStepRunner answers them: greedy steps move ids, not logits
  eo.scheduler.max_model_len = max_len;
  eo.scheduler.max_num_seqs = o.max_num_seqs;
  eo.scheduler.enable_chunked_prefill = !o.no_chunked_prefill;
  // Without chunks a whole prompt runs in one step.
  eo.scheduler.max_num_batched_tokens = StepTokens(o, max_len);
  eo.blocks.num_blocks = blocks;
  eo.blocks.block_size = o.block_size;
  eo.blocks.enable_prefix_caching = !o.no_prefix_caching;
  eo.eos_token_id = config.eos_token_ids.empty() ? -1 : config.eos_token_ids[0];
  eo.speculative = o.speculative;
  return eo;
}

// Serves until a signal (drain, shut the workers down: Ok or the drain's error) or a broken
// group (503 on /ready for --failure-grace, then drain: the group's error).
Status ServeUntilDone(const ServeOptions& o, cli::ServeControl& control,
                      server::EngineService& service, const server::TextCodec& codec,
                      std::unique_ptr<grammar::GrammarCompiler> grammar, cli::RankStatus& status) {
  SPARK_ASSIGN_OR_RETURN(server::OpenAIServerOptions options, ServerOptions(o));
  SPARK_ASSIGN_OR_RETURN(auto srv, server::OpenAIServer::Start(options, &service, &codec,
                                                               std::move(grammar)));
  const std::string url = std::string(options.http.tls.enabled() ? "https" : "http") + "://" +
                          o.host + ":" + std::to_string(srv->port());
  std::printf("serving %s on %s\n", options.served_model_name.c_str(), url.c_str());
  std::fflush(stdout);
  if (options.http.tls.enabled()) {
    server::OpenAIServer* raw = srv.get();
    control.SetOnReload([raw] {
      const Status s = raw->http().ReloadTls();
      if (s.ok()) {
        Logger("engine.serve")->info("SIGHUP: TLS certificate and key re-read");
      } else {
        Logger("engine.serve")->error("SIGHUP: keeping the previous TLS files: {}", s.message());
      }
    });
  }
  control.SetServing(true);
  if (control.failure().ok()) {
    status.Set(RankPhase::kReady, "serving " + options.served_model_name + " on " + url)
        .IgnoreError();
  }
  const cli::ServeControl::Event event = control.Wait();
  Status result;
  if (event == cli::ServeControl::Event::kFailed) {
    control.SleepUnlessStopped(std::chrono::seconds(o.failure_grace_s));
    result = control.failure();  // Possibly replaced by a more precise one meanwhile.
    srv->Drain(std::chrono::seconds(std::min(o.drain_timeout_s, 5))).IgnoreError();
  } else {
    result = srv->Drain(std::chrono::seconds(o.drain_timeout_s));
  }
  control.SetOnReload(nullptr);
  srv->Stop();
  return result;
}

// The engine splits reasoning and tool calls with its chat format's markers: a parser asked
// for by name must be that format's (checked before any weights load).
Status CheckParsers(const ServeOptions& o, std::string_view format) {
  for (auto [flag, name] : {std::pair{"--reasoning-parser", &o.reasoning_parser},
                            std::pair{"--tool-parser", &o.tool_parser}}) {
    if (!name->empty() && *name != format) {
      return InvalidArgumentError(std::string(flag) + " " + *name + ": this model's chat format is " +
                                  std::string(format) + ", and the engine parses with its markers "
                                  "(give " + std::string(format) + ", or --chat-format " + *name +
                                  " if the model was trained on that format)");
    }
  }
  return Status::Ok();
}

// The longest context the checkpoint's positions allow, and why (vLLM's rule): its
// max_position_embeddings, or, when config.json declares YaRN RoPE scaling, the scaling's
// original_max_position_embeddings x factor if that is larger. 0: the config does not say.
std::pair<int64_t, std::string> PositionLimit(const core::ModelConfig& c) {
  const core::YarnSettings& y = c.dsv4.compress_yarn;
  const int64_t yarn =
      y.enabled ? static_cast<int64_t>(y.original_max_position_embeddings * y.factor) : 0;
  if (yarn > c.max_position_embeddings) {
    return {yarn, "YaRN RoPE scaling: original_max_position_embeddings " +
                      std::to_string(y.original_max_position_embeddings) + " x factor " +
                      FormatNumber(y.factor)};
  }
  return {c.max_position_embeddings,
          "config.json max_position_embeddings" +
              std::string(y.enabled ? "" : ", and no RoPE scaling that extends it")};
}

Status CheckMaxModelLen(const ServeOptions& o, const core::ModelConfig& config) {
  const auto [limit, why] = PositionLimit(config);
  if (o.max_model_len > 0 && limit > 0 && o.max_model_len > limit) {
    return InvalidArgumentError("--max-model-len " + std::to_string(o.max_model_len) +
                                " is past the " + std::to_string(limit) +
                                " positions this checkpoint was trained for (" + why +
                                "); give at most " + std::to_string(limit));
  }
  return Status::Ok();
}

Status RunRankZero(const ServeOptions& o, std::shared_ptr<cli::ServeControl> control,
                   cli::RankStatus& status) {
  SPARK_ASSIGN_OR_RETURN(core::ModelConfig config, model::LoadModelConfig(o.model_dir));
  SPARK_RETURN_IF_ERROR(CheckMaxModelLen(o, config));
  const model::ModelFamily* family = model::FindModelFamily(config.model_type);
  SPARK_ASSIGN_OR_RETURN(
      auto codec, server::TokenizerCodec::FromDir(
                      o.tokenizer_dir.empty() ? o.model_dir : o.tokenizer_dir, o.chat_format,
                      std::string(family->chat_format)));
  SPARK_RETURN_IF_ERROR(CheckParsers(o, codec->format_name()));
  SPARK_ASSIGN_OR_RETURN(server::OpenAIServerOptions server_options, ServerOptions(o));
  // Before the weights: the memory baseline then holds the grammar tables with the tokenizer.
  SPARK_ASSIGN_OR_RETURN(auto grammar, server::MakeGrammarCompiler(
                                           *codec, config.vocab_size, server_options.grammar_threads));
  const int max_len = MaxModelLen(o, &config);
  // With --kv-memory-fraction the session sizes the cache once the weights are in.
  const int blocks =
      o.num_kv_blocks > 0        ? o.num_kv_blocks
      : o.kv_memory_fraction > 0 ? 0
                                 : static_cast<int>(model::DefaultKvBlocks(o.max_num_seqs, max_len,
                                                                           o.block_size));
  int port = o.master_port > 0 ? o.master_port : (o.tp > 1 && !LaunchesChildren(o) ? 29500 : 0);
  std::unique_ptr<cli::LocalRanks> children;
  if (LaunchesChildren(o)) {
    if (port == 0) {
      SPARK_ASSIGN_OR_RETURN(port, cli::PickFreeLoopbackPort());
    }
    std::vector<std::vector<std::string>> argvs;
    for (int r = 1; r < o.tp; ++r) argvs.push_back(ChildArgv(o, r, port));
    Logger("engine.serve")
        ->info("starting ranks 1..{}, rendezvous on 127.0.0.1:{}", o.tp - 1, port);
    SPARK_ASSIGN_OR_RETURN(children, cli::StartLocalRanks(argvs, 1));
  }
  ChildWatch watch(children.get(), control);
  cli::RankOptions ro = MakeRankOptions(o, 0, port, blocks, &config);
  ro.status = &status;
  // A dead child usually shows first as a reset connection; its exit, seen by the watch within
  // 50 ms, names it: report that one when it comes.
  const bool has_children = children != nullptr;
  ro.on_group_error = [control, has_children](const Status& s) {
    if (has_children) {
      Status named = control->AwaitNamedFailure(std::chrono::seconds(1));
      if (!named.ok()) return named;
    }
    control->Fail(s, /*names_rank=*/false);
    const Status f = control->failure();
    return f.ok() ? s : f;
  };
  SPARK_ASSIGN_OR_RETURN(auto session, cli::StartRank(ro));
  runtime::EngineOptions engine_options =
      MakeEngineOptions(o, config, max_len, static_cast<int>(session->num_kv_blocks()));
  engine_options.memory_guard = session->memory_guard();
  SPARK_ASSIGN_OR_RETURN(auto engine,
                         runtime::Engine::Create(engine_options, session->runner()));
  Status result;
  {
    server::EngineService service(std::move(engine), max_len, config.vocab_size);
    status
        .Set(RankPhase::kWarming,
             "one greedy token through all " + std::to_string(o.tp) + " rank(s)")
        .IgnoreError();
    result = WarmUp(service, *codec, std::chrono::seconds(o.comm_timeout_s + 30));
    if (result.ok()) {
      control->SetService(&service);
      result = ServeUntilDone(o, *control, service, *codec, std::move(grammar), status);
      control->SetService(nullptr);
    }
  }
  watch.Stop();  // From here on children are expected to exit.
  if (!control->failure().ok()) result = control->failure();
  if (!result.ok() && !control->failure().ok()) {
    session->Abandon();  // The group is broken: no shutdown plan to send.
  } else {
    Status down = session->Shutdown();
    if (!down.ok()) Logger("engine.serve")->warn("shutting the workers down: {}", down.message());
  }
  if (children) {
    if (Status s = children->Wait(std::chrono::seconds(5)); !s.ok() && control->failure().ok()) {
      Logger("engine.serve")->warn("child ranks at shutdown: {}", s.message());
    }
  }
  if (result.ok()) {
    status.Set(RankPhase::kStopped, "drained and shut the group down").IgnoreError();
  } else {
    status.Set(RankPhase::kFailed, result.message()).IgnoreError();
  }
  return result;
}

Status RunServe(const ServeOptions& o) {
  SPARK_RETURN_IF_ERROR(ValidateFlags(o));
  const int rank = std::max(o.rank, 0);
  SPARK_RETURN_IF_ERROR(InitLogging(
      {.level = o.log_level, .rank = o.tp > 1 ? std::optional<int>(rank) : std::nullopt}));
  auto status = std::make_shared<cli::RankStatus>(rank, o.tp, StatusPath(o, rank));
  if (Status s = status->Set(RankPhase::kStarting, "pid " + std::to_string(getpid())); !s.ok()) {
    return s.WithContext("--status-file (is its directory there and writable?)");
  }
  // Before any other thread starts: every thread inherits the blocked signals.
  std::shared_ptr<cli::ServeControl> control = cli::ServeControl::Start(status);
  if (rank > 0) return RunWorkerRank(o, rank, *status);
  Status s = RunRankZero(o, control, *status);
  if (!s.ok() && status->phase() != RankPhase::kFailed) {
    status->Set(RankPhase::kFailed, s.message()).IgnoreError();
  }
  return s;
}

}  // namespace

void RegisterServeCommand(CLI::App& parent, CommandContext& context) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd =
      parent.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  cmd->add_option("--model", o->model_dir, "Hugging Face checkpoint directory")->required();
  cmd->add_option("--tokenizer", o->tokenizer_dir, "Tokenizer directory (default: --model)");
  cmd->add_option("--chat-format", o->chat_format,
                  ChatFormatHelp("detected from the chat template, else the model family's"));
  cmd->add_option("--host", o->host,
                  "Address to bind (default 127.0.0.1; others need --api-key-file)");
  cmd->add_option("--port", o->port, "Port (default 8000; 0 = any free port)");
  cmd->add_option("--api-key-file", o->api_key_file, "File of accepted Bearer keys, one per line");
  cmd->add_option("--ssl-certfile", o->ssl_certfile,
                  "Serve HTTPS with this PEM certificate (chain); re-read on SIGHUP");
  cmd->add_option("--ssl-keyfile", o->ssl_keyfile,
                  "The certificate's unencrypted PEM private key; re-read on SIGHUP");
  cmd->add_option("--ssl-ca-certs", o->ssl_ca_certs,
                  "Require client certificates signed by these PEM CAs (mutual TLS)");
  cmd->add_option("--max-connections", o->max_connections,
                  "Open connections in all (default 1024)");
  cmd->add_option("--max-connections-per-peer", o->max_connections_per_peer,
                  "Open connections from one client address; past it its idle ones are closed, "
                  "then 429 (default 256)");
  cmd->add_option("--max-requests-per-peer", o->max_requests_per_peer,
                  "Requests in flight from one client address before 429 (default 128)");
  cmd->add_option("--served-model-name", o->served_model_name,
                  "Model name in the API (default: directory name)");
  cmd->add_option("--tp", o->tp,
                  "Tensor-parallel ranks, one process each (default 1); without --rank this "
                  "process is rank 0 and starts the others on this machine");
  cmd->add_option("--rank", o->rank,
                  "Run only this rank of --tp (start every rank, on any machine, with the same "
                  "--master-addr/--master-port)");
  cli::AddBackendFlags(cmd, &o->compute);
  cmd->add_option("--master-addr", o->master_addr,
                  "Rank 0's address, with --rank (default 127.0.0.1)");
  cmd->add_option("--master-port", o->master_port,
                  "Rendezvous port (default: a free one when starting local ranks, 29500 with "
                  "--rank)");
  cmd->add_option("--comm-timeout", o->comm_timeout_s,
                  "Seconds to wait for a peer rank before the group counts as broken (default 60)");
  cmd->add_option("--threads", o->threads,
                  "CPU threads: in all for local ranks, per rank with --rank (default: all)");
  cmd->add_option("--status-file", o->status_file,
                  "Write this rank's phase as JSON to PATH at each change ('{rank}' in PATH "
                  "becomes the rank; local child ranks use PATH.rank<r> otherwise)");
  cmd->add_option("--failure-grace", o->failure_grace_s,
                  "Seconds /ready keeps answering 503 after a rank dies, before exiting "
                  "(default 5)");
  cmd->add_option("--max-model-len", o->max_model_len,
                  "Prompt + output tokens per request (default: model's, <= 8192; more than the "
                  "checkpoint's positions is refused unless its YaRN scaling allows it)");
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Sequences per batch (default 64)");
  cmd->add_option("--max-batched-tokens", o->max_batched_tokens,
                  "Tokens per step (prefill and decode); longer prompts are prefilled in chunks "
                  "beside the running decodes (default 2048)");
  cmd->add_option("--num-kv-blocks", o->num_kv_blocks,
                  "KV cache blocks (default: max-num-seqs full sequences, <= 4096)");
  cmd->add_option("--kv-memory-fraction", o->kv_memory_fraction,
                  "Size the KV cache as this fraction (0, 0.9] of the memory the node has "
                  "available once the weights are loaded (instead of --num-kv-blocks; ranks take "
                  "the smallest)");
  cmd->add_option("--block-size", o->block_size, "KV cache block size in tokens (default 16)");
  cmd->add_flag("--no-chunked-prefill", o->no_chunked_prefill,
                "Run each prompt in one step instead of chunks (the step budget becomes at least "
                "--max-model-len; a smaller --max-batched-tokens is refused)");
  cmd->add_flag("--no-prefix-caching", o->no_prefix_caching,
                "Do not reuse the KV blocks of shared prompt prefixes");
  cli::AddSpeculativeFlags(cmd, &o->speculative);
  cmd->add_option("--reasoning-parser", o->reasoning_parser,
                  "Refuse to start unless reasoning is parsed with this format's markers (the "
                  "chat format's)");
  cmd->add_option("--tool-parser", o->tool_parser,
                  "Refuse to start unless tool calls are parsed with this format's markers (the "
                  "chat format's)");
  cmd->add_option("--memory-floor-gib", o->startup_floor_gib,
                  "Refuse to start when a node would keep less memory available once loaded "
                  "(default: 5 on a Spark, scaled down on smaller machines; memory_plan.h)");
  cmd->add_option("--admit-floor-gib", o->admit_floor_gib,
                  "Stop admitting new sequences while a node has less available (default 3 on "
                  "a Spark)");
  cmd->add_option("--hard-floor-gib", o->hard_floor_gib,
                  "Below this, fail waiting requests and the newest running one with 503 "
                  "(default 1 on a Spark)");
  cmd->add_option("--ranks-per-node", o->ranks_per_node,
                  "Ranks of the group that share this machine's memory, for the memory plan "
                  "(default: --tp when this process starts the ranks, else 1)");
  cmd->add_option("--max-pending", o->max_pending, "Sequences in flight before 429 (default 256)");
  cmd->add_option("--drain-timeout", o->drain_timeout_s,
                  "Seconds to let requests finish on SIGTERM (default 30)");
  cmd->add_option("--default-max-tokens", o->default_max_tokens,
                  "max_tokens of a request that gives none (default: the rest of the context "
                  "for chat, 16 for completions)");
  cmd->add_option("--max-tokens-limit", o->max_tokens_limit,
                  "The most max_tokens a request may ask for; more is a 400 (default: the "
                  "context length)");
  cmd->footer(
      "\nExamples:\n  spark-engine serve --model tests/fixtures/models/qwen3-tiny "
      "--tokenizer ../shared/data/tokenizers/qwen3 --port 8000\n"
      "  spark-engine serve --model DIR --tp 2 --status-file /run/engine.json   "
      "(ranks 1.. as child processes)\n"
      "  spark-engine serve --model DIR --tp 2 --rank 1 --master-addr 10.0.0.1 "
      "--master-port 29500   (one rank per machine)\n"
      "Exit status: 0 after SIGTERM and a clean drain; 2 on bad flags, a failed start, or a "
      "broken rank group.");
  cmd->callback([o, cmd, &context] {
    o->tp_given = cmd->count("--tp") > 0;
    o->rank_given = cmd->count("--rank") > 0;
    o->master_addr_given = cmd->count("--master-addr") > 0;
    o->max_batched_tokens_given = cmd->count("--max-batched-tokens") > 0;
    if (context.log_level_given) o->log_level = context.log_level;
    Status s = RunServe(*o);
    context.exit_code = s.ok() ? kExitOk : ReportEngineError(s);
  });
}

}  // namespace spark::engine
