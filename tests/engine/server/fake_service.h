// FakeService: a deterministic GenerationService for server tests. Each request's reply is a
// script picked by keywords in the decoded prompt (a tool call, a think block, plain text),
// emitted one token per tick on the fake's own thread. Tests can break it (every request fails
// with a given error) or hang it (no events at all), and read how many requests it cancelled.
// Thread-safety: as GenerationService.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/server/generation_service.h"

namespace spark::engine::server::testing {

struct FakeOptions {
  std::chrono::microseconds token_delay{0};
  int max_model_len = 4096;
  int vocab_size = 257;
  int32_t eos = 256;
};

using DecodeFn = std::function<std::string(const std::vector<int32_t>&)>;
using EncodeFn = std::function<std::vector<int32_t>(const std::string&)>;

// The reply the fake gives to a prompt (before EOS). A prompt ending inside a begun tool call
// (the tool_choice prefill) gets the rest of a get_weather call, unless it says "nocall".
std::string FakeReply(const std::string& prompt_text);

class FakeService : public GenerationService {
 public:
  FakeService(FakeOptions options, DecodeFn decode, EncodeFn encode);
  ~FakeService() override;

  Status Submit(GenerationRequest request, EventCallback callback) override;
  void Cancel(uint64_t id) override;
  ServiceStats Stats() const override;
  int max_model_len() const override { return options_.max_model_len; }
  int vocab_size() const override { return options_.vocab_size; }

  void SetBroken(Status error);
  void SetHung(bool hung);
  // Progress counters, the running step and the memory guard that Stats() reports.
  void SetEngineStats(const ServiceStats& stats);
  int num_cancelled() const;
  int num_active() const;
  uint64_t num_submitted() const;
  // The sampling params of the last request submitted.
  runtime::SamplingParams last_params() const;

 private:
  struct Active {
    GenerationRequest request;
    EventCallback callback;
    std::vector<int32_t> reply;
    size_t next = 0;
    int cached = 0;
  };
  void Loop();
  bool EmitOne(Active& a);  // True when the request finished.

  const FakeOptions options_;
  const DecodeFn decode_;
  const EncodeFn encode_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Active> active_;
  std::set<std::vector<int32_t>> seen_prompts_;
  std::vector<uint64_t> cancels_;
  Status broken_;
  bool hung_ = false;
  ServiceStats engine_stats_;
  bool stop_ = false;
  int num_cancelled_ = 0;
  uint64_t num_submitted_ = 0;
  runtime::SamplingParams last_params_;
  std::thread thread_;
};

}  // namespace spark::engine::server::testing
