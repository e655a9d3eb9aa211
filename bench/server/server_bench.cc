// server_bench: what the server and scheduler cost per generated token when the model costs
// nothing. Two runs of the same workload (N concurrent requests of T tokens each):
//   engine  Engine::Step loop alone (scheduler, block manager, sampler)
//   server  OpenAIServer + EngineService + N streaming HTTP clients on 127.0.0.1
// "per request-step" = wall time / (tokens generated): the cost one stream adds to one step.
// With --tls the server run serves HTTPS (a self-signed certificate made here, pinned by the
// clients): the difference is what TLS adds per token (bench/server_tls/NOTES.md).
// Prints a table, and JSON with --json FILE.
#include <CLI/CLI.hpp>
#include <chrono>
#include <optional>
#include <cstdio>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/server/engine_service.h"
#include "engine/server/openai_server.h"
#include "sparkctl/tls/certificates.h"
#include "tests/engine/server/http_test_client.h"
#include "tests/engine/server/zero_cost_runner.h"

namespace {

using namespace spark::engine;
using Clock = std::chrono::steady_clock;

struct RunResult {
  std::string name;
  double seconds = 0;
  uint64_t tokens = 0;
  uint64_t steps = 0;
  int errors = 0;
};

runtime::EngineOptions Options(int clients) {
  runtime::EngineOptions eo;
  eo.blocks.num_blocks = 4096;
  eo.scheduler.max_num_seqs = clients;
  eo.eos_token_id = server::ByteCodec::kEos;
  return eo;
}

RunResult RunEngineOnly(int clients, int tokens) {
  server::testing::ZeroCostRunner runner;
  auto engine = std::move(*runtime::Engine::Create(Options(clients), &runner));
  runtime::SamplingParams p;
  p.max_tokens = tokens;
  RunResult r{"engine"};
  const auto start = Clock::now();
  for (int i = 0; i < clients; ++i) {
    std::vector<int32_t> prompt(40, 'a' + i % 26);
    if (!engine->AddRequest(i + 1, prompt, p).ok()) ++r.errors;
  }
  while (engine->HasUnfinished()) {
    auto out = engine->Step();
    if (!out.ok()) return ++r.errors, r;
    for (const auto& o : *out) r.tokens += o.has_token;
    ++r.steps;
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

// A self-signed certificate for 127.0.0.1 in a temporary folder: the files and the PEM to pin.
struct TempCert {
  std::filesystem::path dir;
  std::string cert_pem;
  TempCert() {
    auto pem = spark::tls::MakeSelfSigned({.names = {"127.0.0.1"}});
    cert_pem = pem->cert_pem;
    dir = std::filesystem::temp_directory_path() / ("server_bench_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "cert.pem") << pem->cert_pem;
    std::ofstream(dir / "key.pem") << pem->key_pem;
  }
  ~TempCert() { std::filesystem::remove_all(dir); }
};

RunResult RunServer(int clients, int tokens, bool tls) {
  server::testing::ZeroCostRunner runner;
  const runtime::EngineOptions eo = Options(clients);
  server::EngineService service(std::move(*runtime::Engine::Create(eo, &runner)),
                                eo.scheduler.max_model_len, server::ByteCodec::kVocabSize);
  server::ByteCodec codec;
  server::OpenAIServerOptions options;
  options.http.port = 0;
  options.served_model_name = "zero";
  std::optional<TempCert> cert;
  server::testing::Via via;
  if (tls) {
    cert.emplace();
    options.http.tls = {(cert->dir / "cert.pem").string(), (cert->dir / "key.pem").string(), ""};
    via.ca_pem = cert->cert_pem;
  }
  auto srv = std::move(*server::OpenAIServer::Start(options, &service, &codec));
  RunResult r{tls ? "server-tls" : "server"};
  std::atomic<int> errors{0};
  std::atomic<uint64_t> generated{0};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      nlohmann::json body = {{"model", "zero"},
                             {"prompt", std::string(40, 'a' + i % 26)},
                             {"max_tokens", tokens},
                             {"stream", true},
                             {"stream_options", {{"include_usage", true}}}};
      auto res = server::testing::HttpCallVia(srv->port(), via, "POST", "/v1/completions",
                                              body.dump());
      auto data = server::testing::SseData(res.body);
      if (res.status != 200 || data.size() < 2 || data.back() != "[DONE]") return void(++errors);
      generated +=
          nlohmann::json::parse(data[data.size() - 2])["usage"]["completion_tokens"].get<int>();
    });
  }
  for (auto& t : threads) t.join();
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.tokens = generated;
  r.steps = service.num_steps();
  r.errors = errors;
  srv->Stop();
  return r;
}

nlohmann::json Report(const RunResult& r, int clients) {
  const double per_token_us = r.tokens ? r.seconds / r.tokens * 1e6 : 0;
  const double per_step_ms = r.steps ? r.seconds / r.steps * 1e3 : 0;
  std::printf("%-10s %8d %10llu %8llu %9.3f %12.1f %14.3f %10.0f %6d\n", r.name.c_str(), clients,
              static_cast<unsigned long long>(r.tokens), static_cast<unsigned long long>(r.steps),
              r.seconds, per_token_us, per_step_ms, r.tokens / std::max(r.seconds, 1e-9), r.errors);
  return {{"run", r.name},
          {"clients", clients},
          {"tokens", r.tokens},
          {"steps", r.steps},
          {"seconds", r.seconds},
          {"us_per_request_step", per_token_us},
          {"ms_per_step", per_step_ms},
          {"tokens_per_s", r.tokens / std::max(r.seconds, 1e-9)},
          {"errors", r.errors}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Server + scheduler overhead per generated token with a zero-cost model");
  int clients = 64, tokens = 256;
  std::string json_path;
  bool tls = false;
  app.add_option("--clients", clients, "Concurrent streams (default 64)");
  app.add_flag("--tls", tls, "Also run the server over HTTPS");
  app.add_option("--tokens", tokens, "Tokens per stream (default 256)");
  app.add_option("--json", json_path, "Also write the results as JSON here");
  CLI11_PARSE(app, argc, argv);
  std::printf("%-10s %8s %10s %8s %9s %12s %14s %10s %6s\n", "run", "streams", "tokens", "steps",
              "seconds", "us/req-step", "ms/step(all)", "tok/s", "errors");
  nlohmann::json runs = {Report(RunEngineOnly(clients, tokens), clients),
                         Report(RunServer(clients, tokens, false), clients)};
  if (tls) runs.push_back(Report(RunServer(clients, tokens, true), clients));
  nlohmann::json out = {{"schema", "spark-server-bench/v1"},
                        {"hardware_threads", std::thread::hardware_concurrency()},
                        {"runs", runs}};
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return 0;
}
