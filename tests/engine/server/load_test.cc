// OpenAIServer over the real EngineService (engine/runtime's scheduler and block manager) with
// a zero-cost model runner: 64 concurrent streaming clients, then 1,000 malformed requests in
// clear text and as many inside TLS sessions.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "engine/server/engine_service.h"
#include "engine/server/openai_server.h"
#include "sparkctl/tls/certificates.h"
#include "tests/engine/server/http_test_client.h"
#include "tests/engine/server/zero_cost_runner.h"

namespace spark::engine::server {
namespace {

using nlohmann::json;
using testing::HttpCall;
using testing::SseData;

class LoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime::EngineOptions eo;
    eo.blocks.num_blocks = 2048;
    eo.scheduler.max_num_seqs = 64;
    eo.eos_token_id = ByteCodec::kEos;
    auto engine = runtime::Engine::Create(eo, &runner_);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    service_ = std::make_unique<EngineService>(std::move(*engine), eo.scheduler.max_model_len,
                                               ByteCodec::kVocabSize);
    StartServer({});
  }

  void StartServer(const TlsFiles& tls) {
    server_.reset();
    OpenAIServerOptions options;
    options.http.port = 0;
    options.http.tls = tls;
    options.http.request_timeout = std::chrono::milliseconds(500);
    options.served_model_name = "zero";
    auto server = OpenAIServer::Start(options, service_.get(), &codec_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }

  void FuzzAndCheck(const testing::Via& via);

  // Waits until every request has left the engine.
  void ExpectAllBlocksFree() {
    for (int i = 0; i < 200 && (server_->active_sequences() > 0 || service_->Stats().kv_usage > 0);
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(server_->active_sequences(), 0);
    const ServiceStats s = service_->Stats();
    EXPECT_EQ(s.num_running, 0);
    EXPECT_EQ(s.num_waiting, 0);
    EXPECT_EQ(s.kv_usage, 0.0f);
  }

  testing::ZeroCostRunner runner_;
  ByteCodec codec_;
  std::unique_ptr<EngineService> service_;
  std::unique_ptr<OpenAIServer> server_;
};

TEST_F(LoadTest, SixtyFourConcurrentStreamsWithoutErrors) {
  constexpr int kClients = 64;
  constexpr int kTokens = 32;
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      json body = {{"model", "zero"},
                   {"messages", {{{"role", "user"}, {"content", "client " + std::to_string(i)}}}},
                   {"max_tokens", kTokens},
                   {"stream", true},
                   {"stream_options", {{"include_usage", true}}}};
      auto r = HttpCall(server_->port(), "POST", "/v1/chat/completions", body.dump());
      std::vector<std::string> data = SseData(r.body);
      const bool ok = r.status == 200 && data.size() >= 3 && data.back() == "[DONE]" &&
                      json::parse(data[data.size() - 2])["usage"]["completion_tokens"] == kTokens;
      if (!ok) ++failures;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(failures, 0);
  ExpectAllBlocksFree();
  auto metrics = HttpCall(server_->port(), "GET", "/metrics");
  EXPECT_NE(
      metrics.body.find("vllm:generation_tokens_total{model_name=\"zero\",engine=\"0\"} 2048.0\n"),
      std::string::npos);
}

TEST_F(LoadTest, DisconnectedClientsFreeTheirBlocks) {
  std::vector<std::thread> clients;
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back([&, i] {
      json body = {{"model", "zero"},
                   {"prompt", "client " + std::to_string(i)},
                   {"max_tokens", 3000},
                   {"stream", true}};
      testing::StartAndDisconnect(server_->port(), "/v1/completions", body.dump(), 400);
    });
  }
  for (auto& t : clients) t.join();
  ExpectAllBlocksFree();
  // Every stream ends: aborted when its client's reset is seen, or (rarely, on a loaded
  // machine) by length when the zero-cost model wrote all 3,000 tokens into the socket buffers
  // before that. Most must be aborts, and none may be left running.
  auto metrics = HttpCall(server_->port(), "GET", "/metrics");
  auto count = [&](const std::string& reason) {
    const std::string key = "finished_reason=\"" + reason + "\"} ";
    const size_t at = metrics.body.find(key);
    return at == std::string::npos ? 0 : std::stoi(metrics.body.substr(at + key.size()));
  };
  const int aborted = count("abort"), by_length = count("length");
  EXPECT_EQ(aborted + by_length, 16) << metrics.body;
  EXPECT_GE(aborted, 12) << metrics.body;
}

// Random bytes, truncated bodies, slowloris-style partial headers, bad framing.
std::string MalformedRequest(std::mt19937& rng, int i) {
  const std::string good = R"({"model": "zero", "prompt": "hello", "max_tokens": 4})";
  const std::string head =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";
  switch (i % 6) {
    case 0: {
      std::string junk(1 + rng() % 2000, '\0');
      for (char& c : junk) c = static_cast<char>(rng());
      return junk;
    }
    case 1:  // Body cut short of its Content-Length.
      return head + "Content-Length: " + std::to_string(good.size()) + "\r\n\r\n" +
             good.substr(0, rng() % good.size());
    case 2:  // Headers that never end.
      return head.substr(0, rng() % head.size());
    case 3:  // Truncated JSON with the right length.
    {
      const std::string cut = good.substr(0, rng() % good.size());
      return head + "Content-Length: " + std::to_string(cut.size()) + "\r\n\r\n" + cut;
    }
    case 4:
      return "GET /" + std::string(rng() % 100, 'a') + " HTTP/9.9\r\n\r\n";
    default:
      return head + "Transfer-Encoding: chunked\r\n\r\nzz\r\n" + good;
  }
}

// Sends 1,000 malformed requests (8 clients at once), then checks that the server still
// answers and that nothing is left in the engine.
void LoadTest::FuzzAndCheck(const testing::Via& via) {
  std::mt19937 rng(1234);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::vector<std::thread> workers;
  std::atomic<int> next{0};
  for (int w = 0; w < 8; ++w) {
    workers.emplace_back([&, w] {
      std::mt19937 local(rng() + w);
      for (int i = next++; i < 1000 && std::chrono::steady_clock::now() < deadline; i = next++) {
        testing::RawExchangeVia(server_->port(), via, MalformedRequest(local, i),
                                std::chrono::milliseconds(1500));
      }
    });
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(std::min(next.load(), 1000), 1000);
  EXPECT_EQ(testing::HttpCallVia(server_->port(), via, "GET", "/health").status, 200);
  auto r = testing::HttpCallVia(server_->port(), via, "POST", "/v1/completions",
                                R"({"model": "zero", "prompt": "hello", "max_tokens": 4})");
  EXPECT_EQ(r.status, 200) << r.body << r.error;
  ExpectAllBlocksFree();
  for (int i = 0; i < 300 && server_->http().num_connections() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server_->http().num_connections(), 0);
}

TEST_F(LoadTest, SurvivesAThousandMalformedRequests) { FuzzAndCheck({}); }

// The same through TLS: the malformed bytes arrive inside a valid TLS session.
TEST_F(LoadTest, SurvivesAThousandMalformedRequestsOverTls) {
  auto pem = spark::tls::MakeSelfSigned({.names = {"127.0.0.1"}});
  ASSERT_TRUE(pem.ok()) << pem.status().ToString();
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("load_test_tls_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "cert.pem") << pem->cert_pem;
  std::ofstream(dir / "key.pem") << pem->key_pem;
  StartServer({(dir / "cert.pem").string(), (dir / "key.pem").string(), ""});
  FuzzAndCheck({.ca_pem = pem->cert_pem});
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace spark::engine::server
