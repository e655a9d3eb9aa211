#include "engine/server/engine_service.h"

#include "base/logging.h"

namespace spark::engine::server {

using runtime::FinishReason;

namespace {

EventDelivery::Callback Share(EventCallback callback) {
  return std::make_shared<const EventCallback>(std::move(callback));
}

}  // namespace

EngineService::EngineService(std::unique_ptr<runtime::Engine> engine, int max_model_len,
                             int vocab_size, int delivery_threads)
    : engine_(std::move(engine)),
      max_model_len_(max_model_len),
      vocab_size_(vocab_size),
      delivery_(delivery_threads) {
  RefreshStats();
  thread_ = std::thread([this] { Loop(); });
}

EngineService::~EngineService() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Status EngineService::Submit(GenerationRequest request, EventCallback callback) {
  {
    std::lock_guard lock(mu_);
    if (stop_) return UnavailableError("the engine is shutting down");
    inbox_.push_back({std::move(request), std::move(callback)});
  }
  cv_.notify_one();
  return Status::Ok();
}

void EngineService::Cancel(uint64_t id) {
  {
    std::lock_guard lock(mu_);
    cancels_.push_back(id);
  }
  cv_.notify_one();
}

ServiceStats EngineService::Stats() const {
  std::lock_guard lock(mu_);
  ServiceStats s = stats_;
  if (in_step_) {
    s.step_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - step_started_).count();
  }
  return s;
}

uint64_t EngineService::num_steps() const {
  std::lock_guard lock(mu_);
  return num_steps_;
}

void EngineService::SetBroken(Status error) {
  {
    std::lock_guard lock(mu_);
    broken_ = std::move(error);
  }
  cv_.notify_one();
}

Status EngineService::broken() const {
  std::lock_guard lock(mu_);
  return broken_;
}

void EngineService::Loop() {
  while (true) {
    std::vector<Pending> submitted;
    std::vector<uint64_t> cancelled;
    Status broken;
    {
      std::unique_lock lock(mu_);
      const bool woken = cv_.wait_for(lock, std::chrono::seconds(1), [&] {
        return stop_ || !inbox_.empty() || !cancels_.empty() || engine_->HasUnfinished();
      });
      if (stop_) break;
      if (!woken) {  // idle: keep the memory guard's reading current
        lock.unlock();
        engine_->CheckMemory();
        RefreshStats();
        continue;
      }
      submitted.swap(inbox_);
      cancelled.swap(cancels_);
      broken = broken_;
    }
    if (!broken.ok()) {
      if (!callbacks_.empty()) FailAll(broken);
      for (Pending& p : submitted) {
        delivery_.Post(p.request.id, Share(std::move(p.callback)),
                       {p.request.id, false, 0, 0, {}, 0, true, FinishReason::kAbort, broken});
      }
      RefreshStats();
      continue;
    }
    Admit(submitted);
    ApplyCancels(cancelled);
    if (engine_->HasUnfinished()) RunStep();
    RefreshStats();
    if (engine_->stalled()) {
      // Admission is held (memory guard): look again shortly, or at once on news.
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(50),
                   [&] { return stop_ || !inbox_.empty() || !cancels_.empty(); });
    }
  }
  for (auto& [id, cb] : std::map(callbacks_)) FinishOne(id, FinishReason::kAbort, Status::Ok());
  std::vector<Pending> left;
  {
    std::lock_guard lock(mu_);
    left.swap(inbox_);
  }
  for (Pending& p : left) {
    delivery_.Post(p.request.id, Share(std::move(p.callback)),
                   {p.request.id, false, 0, 0, {}, 0, true, FinishReason::kAbort, {}});
  }
}

void EngineService::Admit(std::vector<Pending>& submitted) {
  for (Pending& p : submitted) {
    const uint64_t id = p.request.id;
    Status s = engine_->AddRequest(id, std::move(p.request.prompt), p.request.params);
    if (!s.ok()) {
      delivery_.Post(id, Share(std::move(p.callback)),
                     {id, false, 0, 0, {}, 0, true, FinishReason::kAbort, s});
      continue;
    }
    callbacks_[id] = Share(std::move(p.callback));
    first_token_sent_[id] = false;
  }
}

void EngineService::ApplyCancels(const std::vector<uint64_t>& cancelled) {
  for (uint64_t id : cancelled) {
    if (callbacks_.count(id) == 0) continue;
    engine_->FinishRequest(id, FinishReason::kAbort).IgnoreError();  // Frees its KV blocks.
    FinishOne(id, FinishReason::kAbort, Status::Ok());
  }
}

void EngineService::RunStep() {
  {
    std::lock_guard lock(mu_);
    in_step_ = true;
    step_started_ = std::chrono::steady_clock::now();
  }
  Result<std::vector<runtime::TokenOutput>> outputs = engine_->Step();
  {
    std::lock_guard lock(mu_);
    in_step_ = false;
  }
  if (!outputs.ok()) return FailAll(outputs.status());
  {
    std::lock_guard lock(mu_);
    ++num_steps_;
  }
  for (runtime::TokenOutput& o : *outputs) {
    auto it = callbacks_.find(o.seq_id);
    if (it == callbacks_.end()) continue;
    GenerationEvent e{o.seq_id, o.has_token, o.token,         o.logprob, std::move(o.top_logprobs),
                      0,        o.finished,  o.finish_reason, o.error};
    if (o.finished) e.times = o.times;
    e.prompt_logprobs = std::move(o.prompt_logprobs);
    if (!first_token_sent_[o.seq_id]) {  // Prefix-cache hits (0 if it finished in this step).
      const runtime::Sequence* seq = engine_->Find(o.seq_id);
      e.cached_prompt_tokens = seq != nullptr ? seq->num_cached_tokens() : 0;
      first_token_sent_[o.seq_id] = true;
    }
    delivery_.Post(o.seq_id, it->second, std::move(e));
    if (o.finished) {
      callbacks_.erase(it);
      first_token_sent_.erase(o.seq_id);
    }
  }
}

// A failed step leaves the plan half-run: end every request so its blocks are freed.
void EngineService::FailAll(const Status& error) {
  Logger("server")->error("engine step failed: {}", error.ToString());
  for (auto& [id, cb] : std::map(callbacks_)) {
    engine_->FinishRequest(id, FinishReason::kAbort).IgnoreError();
    FinishOne(id, FinishReason::kAbort, error);
  }
}

void EngineService::FinishOne(uint64_t id, FinishReason reason, Status error) {
  auto it = callbacks_.find(id);
  if (it == callbacks_.end()) return;
  EventDelivery::Callback cb = std::move(it->second);
  callbacks_.erase(it);
  first_token_sent_.erase(id);
  delivery_.Post(id, std::move(cb), {id, false, 0, 0, {}, 0, true, reason, std::move(error)});
}

void EngineService::RefreshStats() {
  const runtime::EngineStats s = engine_->stats();
  std::lock_guard lock(mu_);
  stats_.num_running = s.num_running;
  stats_.num_waiting = s.num_waiting;
  stats_.kv_usage = s.kv_usage;
  stats_.prefix_queries = s.prefix_queries;
  stats_.prefix_hits = s.prefix_hits;
  stats_.decode_steps = s.decode_steps;
  stats_.num_steps = s.num_steps;
  stats_.prompt_tokens_computed = s.prompt_tokens_computed;
  if (const runtime::MemoryGuard* guard = engine_->memory_guard()) {
    stats_.memory_guard = guard->status();
  }
  stats_.num_preemptions = s.num_preemptions;
  stats_.spec_drafts = s.spec_drafts;
  stats_.spec_draft_tokens = s.spec_draft_tokens;
  stats_.spec_accepted_tokens = s.spec_accepted_tokens;
  stats_.spec_accepted_per_pos = s.spec_accepted_per_pos;
  // The acceptance since the last line, at most one line every 10 s while drafts run.
  const auto now = std::chrono::steady_clock::now();
  if (s.spec_drafts > logged_drafts_ && now - logged_at_ >= std::chrono::seconds(10)) {
    const uint64_t drafts = s.spec_drafts - logged_drafts_;
    const uint64_t proposed = s.spec_draft_tokens - logged_draft_tokens_;
    const uint64_t accepted = s.spec_accepted_tokens - logged_accepted_;
    Logger("server")->info(
        "speculative decoding: {} drafts, {} draft tokens, {} accepted ({:.1f}%), mean "
        "accepted length {:.2f} tokens a step",
        drafts, proposed, accepted, proposed > 0 ? 100.0 * accepted / proposed : 0.0,
        1.0 + static_cast<double>(accepted) / static_cast<double>(drafts));
    logged_drafts_ = s.spec_drafts;
    logged_draft_tokens_ = s.spec_draft_tokens;
    logged_accepted_ = s.spec_accepted_tokens;
    logged_at_ = now;
  }
}

}  // namespace spark::engine::server
