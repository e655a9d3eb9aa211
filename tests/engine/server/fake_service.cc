#include "tests/engine/server/fake_service.h"

#include <algorithm>

namespace spark::engine::server::testing {

using runtime::FinishReason;

std::string FakeReply(const std::string& prompt) {
  if (prompt.find("<tool_response>") != std::string::npos ||
      prompt.find("tool\u2581output") != std::string::npos) {
    return "It is 22 degrees in Paris.";
  }
  // A prompt that already begins a call (tool_choice required / named): continue it, or, when
  // the conversation says "nocall", ignore it.
  // As under the server's grammar, the reply stops after the arguments (the server closes the
  // call's markup itself).
  const bool nocall = prompt.find("nocall") != std::string::npos;
  if (prompt.ends_with("{\"name\": \"")) {
    return nocall ? "I would rather answer in words."
                  : "get_weather\", \"arguments\": {\"city\": \"Paris\"}}";
  }
  if (prompt.ends_with("\"arguments\": ")) {
    return nocall ? "not json" : "{\"city\": \"Paris\"}}";
  }
  if (prompt.find("weather") != std::string::npos) {
    return "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
           "\"Paris\"}}\n</tool_call>";
  }
  // The user's word "think", not the markers of a think block (a prompt rendered with thinking
  // off ends with an empty one).
  std::string words = prompt;
  for (const std::string marker : {"<think>", "</think>"}) {
    for (size_t at; (at = words.find(marker)) != std::string::npos;) words.erase(at, marker.size());
  }
  if (words.find("think") != std::string::npos) {
    return "<think>\nThe user wants 2+2. That is 4.\n</think>\n\nThe answer is 4.";
  }
  if (prompt.find("long") != std::string::npos) {
    std::string text;
    for (int i = 0; i < 200; ++i) text += "word" + std::to_string(i) + " ";
    return text;
  }
  return "Hello! I am a fake model.";
}

FakeService::FakeService(FakeOptions options, DecodeFn decode, EncodeFn encode)
    : options_(options), decode_(std::move(decode)), encode_(std::move(encode)) {
  thread_ = std::thread([this] { Loop(); });
}

FakeService::~FakeService() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Status FakeService::Submit(GenerationRequest request, EventCallback callback) {
  Active a;
  a.reply = encode_(FakeReply(decode_(request.prompt)));
  a.reply.push_back(options_.eos);
  {
    std::lock_guard lock(mu_);
    ++num_submitted_;
    last_params_ = request.params;
    if (!seen_prompts_.insert(request.prompt).second) {
      a.cached = static_cast<int>((request.prompt.size() - 1) / 16 * 16);
    }
    a.request = std::move(request);
    a.callback = std::move(callback);
    active_[a.request.id] = std::move(a);
  }
  cv_.notify_one();
  return Status::Ok();
}

void FakeService::Cancel(uint64_t id) {
  {
    std::lock_guard lock(mu_);
    cancels_.push_back(id);
  }
  cv_.notify_one();
}

void FakeService::SetEngineStats(const ServiceStats& stats) {
  std::lock_guard lock(mu_);
  engine_stats_ = stats;
}

ServiceStats FakeService::Stats() const {
  std::lock_guard lock(mu_);
  ServiceStats s = engine_stats_;
  s.num_running = static_cast<int>(active_.size());
  s.kv_usage = static_cast<float>(active_.size()) / 64.0f;
  return s;
}

void FakeService::SetBroken(Status error) {
  std::lock_guard lock(mu_);
  broken_ = std::move(error);
}

void FakeService::SetHung(bool hung) {
  {
    std::lock_guard lock(mu_);
    hung_ = hung;
  }
  cv_.notify_all();
}

int FakeService::num_cancelled() const {
  std::lock_guard lock(mu_);
  return num_cancelled_;
}

int FakeService::num_active() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(active_.size());
}

runtime::SamplingParams FakeService::last_params() const {
  std::lock_guard lock(mu_);
  return last_params_;
}

uint64_t FakeService::num_submitted() const {
  std::lock_guard lock(mu_);
  return num_submitted_;
}

// Emits the next token of `a`; called without the lock.
bool FakeService::EmitOne(Active& a) {
  GenerationEvent e;
  e.id = a.request.id;
  Status broken;
  {
    std::lock_guard lock(mu_);
    broken = broken_;
  }
  if (!broken.ok()) {
    e.finished = true;
    e.error = broken;
    a.callback(e);
    return true;
  }
  const runtime::SamplingParams& p = a.request.params;
  e.has_token = true;
  e.token = a.reply[a.next++];
  e.cached_prompt_tokens = a.next == 1 ? a.cached : 0;
  if (p.logprobs || p.top_logprobs > 0) {
    e.logprob = -0.25f;
    for (int k = 0; k < p.top_logprobs; ++k) e.top_logprobs.push_back({e.token + k, -0.25f - k});
  }
  const bool eos = e.token == options_.eos && !p.ignore_eos;
  const bool stop_id = std::count(p.stop_token_ids.begin(), p.stop_token_ids.end(), e.token) > 0;
  if (eos || stop_id) {
    e.finished = true;
    e.finish_reason = FinishReason::kStop;
  } else if (static_cast<int>(a.next) >= p.max_tokens || a.next >= a.reply.size()) {
    e.finished = true;
    e.finish_reason = FinishReason::kLength;
  }
  a.callback(e);
  return e.finished;
}

void FakeService::Loop() {
  while (true) {
    std::vector<Active> cancelled, running;
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(100),
                   [&] { return stop_ || !cancels_.empty() || (!active_.empty() && !hung_); });
      if (stop_) return;
      for (uint64_t id : std::exchange(cancels_, {})) {
        auto it = active_.find(id);
        if (it == active_.end()) continue;
        ++num_cancelled_;
        cancelled.push_back(std::move(it->second));
        active_.erase(it);
      }
      if (!hung_) {
        for (auto& [id, a] : active_) running.push_back(std::move(a));
        active_.clear();
      }
    }
    // Callbacks run without the lock: they may call Cancel.
    for (Active& a : cancelled) {
      GenerationEvent e;
      e.id = a.request.id;
      e.finished = true;
      e.finish_reason = FinishReason::kAbort;
      a.callback(e);
    }
    std::erase_if(running, [this](Active& a) { return EmitOne(a); });
    {
      std::lock_guard lock(mu_);
      for (Active& a : running) active_[a.request.id] = std::move(a);
    }
    if (options_.token_delay.count() > 0 && !running.empty()) {
      std::this_thread::sleep_for(options_.token_delay);
    }
  }
}

}  // namespace spark::engine::server::testing
