// fake_openai_server: the OpenAI server over the deterministic FakeService, for client tests in
// other languages. Prints "listening on PORT" once ready; SIGTERM/SIGINT drain and exit 0.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <fstream>

#include "base/logging.h"
#include "engine/server/openai_server.h"
#include "tests/engine/server/fake_service.h"

namespace {

using namespace spark::engine::server;

int Run(const std::string& tokenizer_dir, OpenAIServerOptions options, int delay_ms,
        const std::string& key_file) {
  std::unique_ptr<TextCodec> codec;
  int vocab_size = ByteCodec::kVocabSize;
  if (tokenizer_dir.empty()) {
    codec = std::make_unique<ByteCodec>();
  } else {
    auto loaded = TokenizerCodec::FromDir(tokenizer_dir);
    if (!loaded.ok()) {
      std::fprintf(stderr, "fake_openai_server: %s\n", loaded.status().ToString().c_str());
      return 2;
    }
    vocab_size = (*loaded)->tokenizer().vocab_size();
    codec = std::move(*loaded);
  }
  if (!key_file.empty()) {
    auto keys = ApiKeys::FromFile(key_file);
    if (!keys.ok()) {
      std::fprintf(stderr, "fake_openai_server: %s\n", keys.status().ToString().c_str());
      return 2;
    }
    options.api_keys = *keys;
  }
  testing::FakeOptions fake;
  fake.token_delay = std::chrono::milliseconds(delay_ms);
  fake.eos = codec->stop_token_ids().empty() ? 0 : codec->stop_token_ids()[0];
  fake.vocab_size = vocab_size;  // The tokenizer's: every id it can produce.
  const TextCodec* c = codec.get();
  testing::FakeService service(
      fake,
      [c](const std::vector<int32_t>& ids) {
        std::string s;
        auto stream = c->NewStream();
        for (int32_t t : ids) s += stream->Push(t);
        return s + stream->Flush();
      },
      [c](const std::string& text) { return c->Encode(text, false); });
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // Before any thread starts.
  auto server = OpenAIServer::Start(options, &service, c);
  if (!server.ok()) {
    std::fprintf(stderr, "fake_openai_server: %s\n", server.status().ToString().c_str());
    return 2;
  }
  std::printf("listening on %d\n", (*server)->port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  spark::Status drained = (*server)->Drain(std::chrono::seconds(30));
  (*server)->Stop();
  return drained.ok() ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("OpenAI server over a deterministic fake model (tests only)");
  std::string tokenizer_dir, key_file;
  OpenAIServerOptions options;
  options.http.port = 0;
  options.served_model_name = "fake";
  int delay_ms = 0;
  app.add_option("--tokenizer", tokenizer_dir, "Tokenizer directory (default: one token per byte)");
  app.add_option("--host", options.http.host, "Address to bind (default 127.0.0.1)");
  app.add_option("--port", options.http.port, "Port (default 0: any free port)");
  app.add_option("--api-key-file", key_file, "File with accepted API keys");
  app.add_option("--served-model-name", options.served_model_name, "Model name (default fake)");
  app.add_option("--token-delay-ms", delay_ms, "Delay between tokens (default 0)");
  app.add_option("--max-pending", options.max_pending_sequences, "Sequences in flight at most");
  CLI11_PARSE(app, argc, argv);
  return Run(tokenizer_dir, options, delay_ms, key_file);
}
