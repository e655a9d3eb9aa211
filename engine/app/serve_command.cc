// `spark-engine serve`: the OpenAI-compatible server (engine/server) over the scheduler and a
// model on the CPU backend. With --tp N the N ranks run as threads of this process over an
// in-process communicator: rank 0 broadcasts each step plan, the others run RunWorkerLoop.
// SIGTERM/SIGINT: stop accepting, let running requests finish (--drain-timeout), exit 0.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "base/logging.h"
#include "engine/app/engine_command.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/comm/communicator.h"
#include "engine/model/model.h"
#include "engine/model/model_runner.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/plan_broadcast.h"
#include "engine/server/engine_service.h"
#include "engine/server/openai_server.h"

namespace spark::engine {
namespace {

struct ServeOptions {
  std::string model_dir;
  std::string tokenizer_dir;  // Default: the model directory.
  std::string chat_format;    // Default: detected from the chat template.
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key_file;
  std::string served_model_name;  // Default: the model directory's name.
  int tp = 1;
  int threads = 0;
  int max_model_len = 0;  // 0: the model's max_position_embeddings, at most 8192.
  int max_num_seqs = 64;
  int num_kv_blocks = 0;  // 0: enough for max_num_seqs full-length sequences, at most 4096.
  int block_size = 16;
  int max_pending = 256;
  int drain_timeout_s = 30;
};

struct Rank {
  std::unique_ptr<backend::cpu::CpuBackend> backend;
  std::unique_ptr<model::Model> model;
  std::unique_ptr<model::ModelStepRunner> runner;  // owns the rank's KV cache
};

Result<std::unique_ptr<Rank>> LoadRank(const ServeOptions& o, comm::Communicator* comm, int rank,
                                       int num_blocks) {
  const int threads =
      o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
  auto r = std::make_unique<Rank>();
  r->backend = std::make_unique<backend::cpu::CpuBackend>(std::max(1, threads / o.tp));
  model::ModelOptions options;
  options.shard = {rank, o.tp};
  SPARK_ASSIGN_OR_RETURN(r->model, model::LoadModel(o.model_dir, *r->backend, comm, options));
  // Every rank computes the full logits (gathered), but only rank 0 samples from them.
  SPARK_ASSIGN_OR_RETURN(r->runner, model::ModelStepRunner::Create(r->model.get(), *r->backend,
                                                                   num_blocks, o.block_size,
                                                                   /*return_logits=*/rank == 0));
  return r;
}

// Loads every rank (in parallel: ranks may meet in collectives while loading).
Result<std::vector<std::unique_ptr<Rank>>> LoadRanks(
    const ServeOptions& o, std::vector<std::unique_ptr<comm::Communicator>>& group,
    int num_blocks) {
  std::vector<Result<std::unique_ptr<Rank>>> loaded;
  for (int r = 0; r < o.tp; ++r) loaded.emplace_back(InternalError("rank not loaded"));
  std::vector<std::thread> threads;
  for (int r = 0; r < o.tp; ++r) {
    threads.emplace_back([&, r] {
      loaded[r] = LoadRank(o, group.empty() ? nullptr : group[r].get(), r, num_blocks);
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < o.tp; ++r) {
    if (!loaded[r].ok()) return loaded[r].status().WithContext("rank " + std::to_string(r));
    ranks.push_back(std::move(*loaded[r]));
  }
  return ranks;
}

Result<server::OpenAIServerOptions> ServerOptions(const ServeOptions& o) {
  server::OpenAIServerOptions s;
  s.http.host = o.host;
  s.http.port = o.port;
  s.max_pending_sequences = o.max_pending;
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

Status Serve(const ServeOptions& o, server::GenerationService* service,
             const server::TextCodec* codec, const sigset_t& signals) {
  SPARK_ASSIGN_OR_RETURN(server::OpenAIServerOptions options, ServerOptions(o));
  SPARK_ASSIGN_OR_RETURN(auto srv, server::OpenAIServer::Start(options, service, codec));
  std::printf("serving %s on http://%s:%d\n", options.served_model_name.c_str(), o.host.c_str(),
              srv->port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  Logger("server")->info("signal {}: draining", sig);
  Status drained = srv->Drain(std::chrono::seconds(o.drain_timeout_s));
  srv->Stop();
  return drained;
}

Status RunServe(const ServeOptions& o) {
  if (o.tp < 1) return InvalidArgumentError("--tp must be >= 1");
  sigset_t signals;  // Blocked before any thread starts, then awaited with sigwait.
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  SPARK_ASSIGN_OR_RETURN(
      auto codec, server::TokenizerCodec::FromDir(
                      o.tokenizer_dir.empty() ? o.model_dir : o.tokenizer_dir, o.chat_format));
  SPARK_ASSIGN_OR_RETURN(core::ModelConfig config, core::LoadModelConfig(o.model_dir));
  const int max_len =
      o.max_model_len > 0 ? o.max_model_len : std::min(8192, config.max_position_embeddings);
  const int blocks =
      o.num_kv_blocks > 0
          ? o.num_kv_blocks
          : std::min(4096, o.max_num_seqs * ((max_len + o.block_size - 1) / o.block_size));
  auto group =
      o.tp > 1 ? comm::CreateLocalGroup(o.tp) : std::vector<std::unique_ptr<comm::Communicator>>();
  SPARK_ASSIGN_OR_RETURN(auto ranks, LoadRanks(o, group, blocks));
  std::vector<std::thread> workers;
  std::vector<Status> worker_status(o.tp);
  for (int r = 1; r < o.tp; ++r) {
    workers.emplace_back(
        [&, r] { worker_status[r] = runtime::RunWorkerLoop(*group[r], *ranks[r]->runner); });
  }
  std::unique_ptr<runtime::BroadcastingModelRunner> broadcast;
  runtime::ModelRunner* runner = ranks[0]->runner.get();
  if (o.tp > 1) {
    broadcast = std::make_unique<runtime::BroadcastingModelRunner>(group[0].get(), runner);
    runner = broadcast.get();
  }
  runtime::EngineOptions eo;
  eo.scheduler.max_model_len = max_len;
  eo.scheduler.max_num_seqs = o.max_num_seqs;
  eo.blocks.num_blocks = blocks;
  eo.blocks.block_size = o.block_size;
  eo.eos_token_id = config.eos_token_ids.empty() ? -1 : config.eos_token_ids[0];
  Status status;
  {
    Result<std::unique_ptr<runtime::Engine>> engine = runtime::Engine::Create(eo, runner);
    if (engine.ok()) {
      server::EngineService service(std::move(*engine), max_len, config.vocab_size);
      status = Serve(o, &service, codec.get(), signals);
    } else {
      status = engine.status();
    }
  }
  if (broadcast) broadcast->Shutdown().IgnoreError();  // Workers leave their loops.
  for (std::thread& t : workers) t.join();
  return status;
}

}  // namespace

void RegisterServeCommand(CLI::App& parent, EngineContext& context) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd =
      parent.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  cmd->add_option("--model", o->model_dir, "Hugging Face checkpoint directory")->required();
  cmd->add_option("--tokenizer", o->tokenizer_dir, "Tokenizer directory (default: --model)");
  cmd->add_option("--chat-format", o->chat_format,
                  "qwen3, deepseek_v3 or deepseek_v4 (default: detected)");
  cmd->add_option("--host", o->host,
                  "Address to bind (default 127.0.0.1; others need --api-key-file)");
  cmd->add_option("--port", o->port, "Port (default 8000; 0 = any free port)");
  cmd->add_option("--api-key-file", o->api_key_file, "File of accepted Bearer keys, one per line");
  cmd->add_option("--served-model-name", o->served_model_name,
                  "Model name in the API (default: directory name)");
  cmd->add_option("--tp", o->tp, "Tensor-parallel ranks, run as threads (default 1)");
  cmd->add_option("--threads", o->threads, "CPU threads in all (default: every core)");
  cmd->add_option("--max-model-len", o->max_model_len,
                  "Prompt + output tokens per request (default: model's, <= 8192)");
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Sequences per batch (default 64)");
  cmd->add_option("--num-kv-blocks", o->num_kv_blocks,
                  "KV cache blocks (default: max-num-seqs full sequences, <= 4096)");
  cmd->add_option("--block-size", o->block_size, "KV cache block size in tokens (default 16)");
  cmd->add_option("--max-pending", o->max_pending, "Sequences in flight before 429 (default 256)");
  cmd->add_option("--drain-timeout", o->drain_timeout_s,
                  "Seconds to let requests finish on SIGTERM (default 30)");
  cmd->footer(
      "\nExample:\n  spark-engine serve --model tests/fixtures/models/qwen3-tiny "
      "--tokenizer ../shared/data/tokenizers/qwen3 --port 8000");
  cmd->callback([o, &context] {
    Status s = RunServe(*o);
    context.exit_code = s.ok() ? kExitOk : ReportEngineError(s);
  });
}

}  // namespace spark::engine
