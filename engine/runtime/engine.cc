#include "engine/runtime/engine.h"

#include <algorithm>
#include <limits>
#include <string>

namespace spark::engine::runtime {

Result<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options, ModelRunner* runner) {
  SPARK_RETURN_IF_ERROR(options.scheduler.Validate());
  if (options.blocks.num_blocks < 1 || options.blocks.block_size < 1) {
    return InvalidArgumentError("engine: num_blocks and block_size must be >= 1");
  }
  if (runner == nullptr || runner->vocab_size() < 1) {
    return InvalidArgumentError("engine: a model runner with a vocabulary is required");
  }
  std::unique_ptr<Drafter> drafter;
  if (options.speculative.enabled()) {
    SPARK_ASSIGN_OR_RETURN(drafter, MakeDrafter(options.speculative, runner));
    if (const std::string why = runner->WhyNoSpeculation(); !why.empty()) {
      return FailedPreconditionError("speculative method " + options.speculative.method +
                                     ": " + why + "; run without speculative decoding");
    }
  } else {
    SPARK_RETURN_IF_ERROR(options.speculative.Validate());
  }
  std::unique_ptr<Engine> engine(new Engine(options, runner));
  engine->drafter_ = std::move(drafter);
  engine->scheduler_.set_drafter(engine->drafter_.get(),
                                 options.speculative.num_speculative_tokens);
  return engine;
}

Engine::Engine(const EngineOptions& options, ModelRunner* runner)
    : options_(options),
      runner_(runner),
      blocks_(options.blocks),
      scheduler_(options.scheduler, &blocks_) {}

Status Engine::AddRequest(uint64_t id, std::vector<int32_t> prompt, const SamplingParams& params) {
  const std::string who = "request " + std::to_string(id) + ": ";
  SPARK_RETURN_IF_ERROR(params.Validate().WithContext("request " + std::to_string(id)));
  if (sequences_.count(id) > 0) return AlreadyExistsError(who + "id already in use");
  if (prompt.empty()) return InvalidArgumentError(who + "empty prompt");
  const int max_len = options_.scheduler.max_model_len;
  if (static_cast<int>(prompt.size()) >= max_len) {
    return InvalidArgumentError(who + "prompt of " + std::to_string(prompt.size()) +
                                " tokens leaves no room under max_model_len " +
                                std::to_string(max_len));
  }
  for (int32_t t : prompt) {
    if (t < 0 || t >= runner_->vocab_size()) {
      return InvalidArgumentError(who + "token " + std::to_string(t) + " outside the vocabulary");
    }
  }
  const int blocks_needed =
      (static_cast<int>(prompt.size()) + blocks_.block_size()) / blocks_.block_size();
  if (blocks_needed > blocks_.num_blocks()) {
    return ResourceExhaustedError(who + "prompt needs " + std::to_string(blocks_needed) +
                                  " KV blocks, the cache has " +
                                  std::to_string(blocks_.num_blocks()));
  }
  for (const auto& [token, bias] : params.logit_bias) {
    if (token >= runner_->vocab_size()) {
      return InvalidArgumentError(who + "logit_bias token " + std::to_string(token) +
                                  " outside the vocabulary");
    }
  }
  const uint64_t seed = params.seed.value_or(options_.seed + id);
  auto seq = std::make_unique<Sequence>(id, std::move(prompt), params, seed);
  seq->times().queued = RequestTimes::Clock::now();
  if (params.constraint) {
    Result<std::unique_ptr<TokenConstraint>> c = params.constraint->NewConstraint();
    if (!c.ok()) return c.status().WithContext("request " + std::to_string(id));
    seq->set_constrained(
        std::make_unique<ConstrainedOutput>(std::move(*c), params.constraint_gate));
    if (!masks_) {
      masks_ = std::make_unique<ConstraintMasks>(options_.constraint_threads,
                                                 runner_->vocab_size());
    }
  }
  scheduler_.Add(seq.get());
  sequences_.emplace(id, std::move(seq));
  return Status::Ok();
}

Status Engine::FinishRequest(uint64_t id, FinishReason reason) {
  auto it = sequences_.find(id);
  if (it == sequences_.end()) return NotFoundError("request " + std::to_string(id) + " unknown");
  if (it->second->status() != SequenceStatus::kFinished)
    scheduler_.Finish(it->second.get(), reason);
  sequences_.erase(it);
  return Status::Ok();
}

const Sequence* Engine::Find(uint64_t id) const {
  auto it = sequences_.find(id);
  return it == sequences_.end() ? nullptr : it->second.get();
}

void Engine::Shed(Sequence* seq, const std::string& why, std::vector<TokenOutput>* outputs) {
  scheduler_.Finish(seq, FinishReason::kAbort);
  TokenOutput o{seq->id(), false, 0, 0.0f, {}, true, FinishReason::kAbort};
  o.error = UnavailableError(why);
  outputs->push_back(std::move(o));
}

void Engine::ApplyMemoryGuard(std::vector<TokenOutput>* outputs) {
  if (options_.memory_guard == nullptr) return;
  const GuardState state = options_.memory_guard->Check();
  scheduler_.set_admit(state == GuardState::kOk);
  if (state != GuardState::kShed) return;
  const std::string low = "host memory is low (" + options_.memory_guard->Describe() + ")";
  std::vector<Sequence*> waiting = scheduler_.waiting();
  for (Sequence* seq : waiting) {
    Shed(seq, low + ": the request was not started; retry later", outputs);
  }
  options_.memory_guard->CountShed(waiting.size());
  Sequence* newest = scheduler_.newest_running();
  if (newest != nullptr && options_.memory_guard->TakeShed()) {
    Shed(newest, low + ": the newest running request was stopped to protect the host; retry "
                       "later", outputs);
  }
}

Result<std::vector<TokenOutput>> Engine::Step() {
  std::vector<TokenOutput> outputs;
  ApplyMemoryGuard(&outputs);
  SchedulerOutput out = scheduler_.Schedule();
  // A model drafter's failed forward leaves its sequence without a draft this step; the
  // engine stops rather than serve on with a drafter that errs.
  if (drafter_ != nullptr) SPARK_RETURN_IF_ERROR(drafter_->status());
  stalled_ = out.plan.entries.empty() && out.out_of_memory.empty() && outputs.empty() &&
             scheduler_.HasWork();
  for (Sequence* seq : out.out_of_memory) {
    outputs.push_back({seq->id(), false, 0, 0.0f, {}, true, seq->finish_reason()});
  }
  if (!out.plan.entries.empty()) {
    const RequestTimes::Clock::time_point now = RequestTimes::Clock::now();
    for (const ScheduledSequence& s : out.scheduled) {
      RequestTimes& t = s.seq->times();
      if (t.scheduled == RequestTimes::Clock::time_point()) t.scheduled = now;
    }
    const std::vector<int> mask_rows = StartMasks(out);  // Filled while the forward runs.
    if (options_.argmax_plans && AllGreedy(out)) out.plan.command = StepCommand::kRunArgMax;
    Result<std::vector<float>> logits = runner_->Run(out.plan);
    const Status masks = masks_ ? masks_->Wait() : Status::Ok();
    if (!logits.ok()) return logits.status();
    SPARK_RETURN_IF_ERROR(masks);
    scheduler_.Commit(out);
    SPARK_RETURN_IF_ERROR(SampleRows(out, *logits, mask_rows, &outputs));
    ++num_steps_;
  }
  DropFinished();
  return outputs;
}

bool Engine::AllGreedy(const SchedulerOutput& out) const {
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    if (!out.plan.entries[i].needs_logits) continue;
    const SamplingParams& p = out.scheduled[i].seq->params();
    if (out.plan.entries[i].prompt_logits || p.scores_prompt()) return false;
    if (p.temperature != 0.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f ||
        p.repetition_penalty != 1.0f || p.logprobs || p.top_logprobs > 0 ||
        p.ProcessesLogits()) {
      return false;
    }
  }
  return true;
}

std::vector<int> Engine::StartMasks(const SchedulerOutput& out) {
  std::vector<int> rows(out.scheduled.size(), -1);
  if (!masks_) return rows;
  std::vector<ConstrainedOutput*> constrained;
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    ConstrainedOutput* c = out.scheduled[i].seq->constrained();
    const StepPlanEntry& e = out.plan.entries[i];
    const bool samples = e.needs_logits && e.start_pos + out.scheduled[i].num_new_tokens ==
                                               out.scheduled[i].seq->num_tokens();
    if (c == nullptr || !c->active() || !samples) continue;
    rows[i] = static_cast<int>(constrained.size());
    constrained.push_back(c);
  }
  masks_->Start(std::move(constrained));
  return rows;
}

Result<SampleResult> Engine::SampleProcessed(Sequence& seq, std::span<const float> row,
                                             std::span<const uint32_t> mask, int32_t draft,
                                             bool* accepted) {
  const SamplingParams& p = seq.params();
  auto sample = [&](std::span<const float> logits) -> Result<SampleResult> {
    if (draft < 0) return Sample(logits, p, seq.prompt_ids(), seq.output_ids(), seq.rng());
    return VerifyDraftToken(logits, p, seq.prompt_ids(), seq.output_ids(), draft, seq.rng(),
                            accepted);
  };
  if (!p.ProcessesLogits()) return sample(row);
  std::vector<int32_t> blocked;
  if (seq.num_output_tokens() < p.min_tokens) {
    blocked = p.stop_token_ids;
    if (!p.ignore_eos && options_.eos_token_id >= 0) blocked.push_back(options_.eos_token_id);
  }
  const std::vector<float> processed = ProcessLogits(row, p, blocked, mask);
  if (std::none_of(processed.begin(), processed.end(),
                   [](float l) { return l > -std::numeric_limits<float>::infinity(); })) {
    return InternalError("request " + std::to_string(seq.id()) +
                         ": structured output left no token to sample");
  }
  SPARK_ASSIGN_OR_RETURN(SampleResult s, sample(processed));
  FillLogprobs(row, p, &s);  // vLLM reports logprobs of the raw logits.
  return s;
}

Status Engine::SampleRows(const SchedulerOutput& out, const std::vector<float>& logits,
                          const std::vector<int>& mask_rows, std::vector<TokenOutput>* outputs) {
  const bool ids = out.plan.command == StepCommand::kRunArgMax;
  const size_t vocab = ids ? 1 : static_cast<size_t>(runner_->vocab_size());
  if (logits.size() != vocab * out.plan.num_logits_rows()) {
    return InternalError("model runner returned " + std::to_string(logits.size()) +
                         " logits, expected " + std::to_string(out.plan.num_logits_rows()) +
                         " rows of " + std::to_string(vocab));
  }
  size_t row = 0;
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    Sequence* seq = out.scheduled[i].seq;
    if (seq->num_output_tokens() == 0) prompt_tokens_computed_ += out.scheduled[i].num_new_tokens;
    const StepPlanEntry& entry = out.plan.entries[i];
    if (!entry.needs_logits) continue;
    // Row d verifies draft[d] (the token after the sequence's last one and the d drafts
    // before it); the row after the last accepted draft gives the target's own token.
    const std::vector<int32_t>& draft = out.scheduled[i].draft;
    size_t first_row = row;
    if (entry.prompt_logits) {  // a row per token: all but the prompt's last one score it
      ScorePrompt(seq, entry, logits.data() + row * vocab, vocab);
      row += entry.token_ids.size();
      if (entry.start_pos + out.scheduled[i].num_new_tokens != seq->num_tokens()) continue;
      first_row = row - 1;
    } else {
      row += 1 + draft.size();
    }
    if (seq->params().max_tokens == 0) {  // scored, nothing to generate
      EndScored(seq, outputs);
      continue;
    }
    int accepted = 0;
    for (size_t d = 0; d <= draft.size(); ++d) {
      std::span<const float> r(logits.data() + (first_row + d) * vocab, vocab);
      const int32_t proposal = d < draft.size() ? draft[d] : -1;
      bool kept = false;
      SampleResult s;
      if (ids) {
        s.token = static_cast<int32_t>(r[0]);  // the runner's argmax (greedy, no logprobs)
        if (s.token < 0 || s.token >= runner_->vocab_size()) {
          return InternalError("model runner picked token " + std::to_string(s.token) +
                               " outside the vocabulary of " +
                               std::to_string(runner_->vocab_size()));
        }
        kept = s.token == proposal;
      } else {
        std::span<const uint32_t> mask;
        ConstrainedOutput* c = seq->constrained();
        if (d == 0 && mask_rows[i] >= 0) {
          mask = masks_->row(static_cast<size_t>(mask_rows[i]));
        } else if (d > 0 && c != nullptr && c->active()) {
          // The grammar has followed the drafts accepted so far: this position's mask.
          draft_mask_.assign(MaskWords(runner_->vocab_size()), 0u);
          SPARK_RETURN_IF_ERROR(
              c->FillMask(draft_mask_).WithContext("request " + std::to_string(seq->id())));
          mask = draft_mask_;
        }
        SPARK_ASSIGN_OR_RETURN(s, SampleProcessed(*seq, r, mask, proposal, &kept));
      }
      SPARK_ASSIGN_OR_RETURN(const bool finished, EmitToken(seq, std::move(s), outputs));
      if (kept) ++accepted;
      if (finished || !kept) break;
    }
    if (!draft.empty()) {
      ++spec_drafts_;
      spec_draft_tokens_ += draft.size();
      spec_accepted_tokens_ += static_cast<uint64_t>(accepted);
      if (spec_accepted_per_pos_.size() < draft.size()) spec_accepted_per_pos_.resize(draft.size());
      for (int i = 0; i < accepted; ++i) ++spec_accepted_per_pos_[i];
      scheduler_.CommitDraft(seq, accepted);
    }
  }
  return Status::Ok();
}

void Engine::ScorePrompt(Sequence* seq, const StepPlanEntry& entry, const float* rows,
                         size_t vocab) {
  std::vector<SampleResult>& scores = seq->prompt_logprobs();
  std::vector<size_t> todo;  // rows j whose target token is the next one to score
  for (size_t j = 0; j < entry.token_ids.size(); ++j) {
    const int target = entry.start_pos + static_cast<int>(j) + 1;  // the token row j predicts
    if (target >= seq->prompt_len()) break;
    if (target != static_cast<int>(scores.size() + todo.size()) + 1) continue;  // scored before
    todo.push_back(j);
  }
  const size_t first = scores.size();
  scores.resize(first + todo.size());
  // A row is a pass over the whole vocabulary (151,936 exps for Qwen3): rows go to a pool.
  if (!score_pool_) score_pool_ = std::make_unique<ThreadPool>(0);
  score_pool_->ParallelFor(static_cast<int64_t>(todo.size()), 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const size_t j = todo[i];
      const int target = entry.start_pos + static_cast<int>(j) + 1;
      scores[first + i] = ScoreToken(std::span<const float>(rows + j * vocab, vocab),
                                     seq->token_ids()[target], seq->params().prompt_logprobs);
    }
  });
}

void Engine::EndScored(Sequence* seq, std::vector<TokenOutput>* outputs) {
  scheduler_.Finish(seq, FinishReason::kLength);
  TokenOutput o{seq->id(), false, 0, 0.0f, {}, true, FinishReason::kLength};
  o.times = seq->times();
  o.prompt_logprobs = seq->prompt_logprobs();
  outputs->push_back(std::move(o));
}

Result<bool> Engine::EmitToken(Sequence* seq, SampleResult s, std::vector<TokenOutput>* outputs) {
  seq->AppendToken(s.token);
  RequestTimes& times = seq->times();
  times.last_token = RequestTimes::Clock::now();
  if (seq->num_output_tokens() == 1) times.first_token = times.last_token;
  if (ConstrainedOutput* c = seq->constrained()) {
    SPARK_RETURN_IF_ERROR(c->Advance(s.token).WithContext("request " + std::to_string(seq->id())));
  }
  TokenOutput o{seq->id(), true, s.token, s.logprob, std::move(s.top_logprobs), false, {}};
  if (seq->num_output_tokens() == 1 && seq->params().scores_prompt()) {
    o.prompt_logprobs = seq->prompt_logprobs();
  }
  o.finish_reason = CheckStop(*seq);
  const bool finished = o.finish_reason != FinishReason::kNone;
  if (finished) {
    scheduler_.Finish(seq, o.finish_reason);
    o.finished = true;
    o.times = seq->times();
  }
  outputs->push_back(std::move(o));
  return finished;
}

FinishReason Engine::CheckStop(const Sequence& seq) const {
  const int32_t t = seq.last_token();
  const SamplingParams& p = seq.params();
  if (!p.ignore_eos && t == options_.eos_token_id) return FinishReason::kStop;
  if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), t) != p.stop_token_ids.end()) {
    return FinishReason::kStop;
  }
  // A complete grammar lets only a stop token follow; once it took one, the output is done.
  if (seq.constrained() != nullptr && seq.constrained()->terminated()) return FinishReason::kStop;
  if (seq.num_output_tokens() >= p.max_tokens) return FinishReason::kLength;
  if (seq.num_tokens() >= options_.scheduler.max_model_len) return FinishReason::kLength;
  return FinishReason::kNone;
}

void Engine::DropFinished() {
  std::erase_if(sequences_,
                [](const auto& kv) { return kv.second->status() == SequenceStatus::kFinished; });
}

EngineStats Engine::stats() const {
  EngineStats s;
  s.num_running = scheduler_.num_running();
  s.num_waiting = scheduler_.num_waiting();
  s.kv_usage = blocks_.usage();
  s.prefix_queries = blocks_.prefix_queries();
  s.prefix_hits = blocks_.prefix_hits();
  s.num_preemptions = scheduler_.num_preemptions();
  s.num_steps = num_steps_;
  s.prompt_tokens_computed = prompt_tokens_computed_;
  s.decode_steps = runner_->decode_steps();
  s.spec_drafts = spec_drafts_;
  s.spec_draft_tokens = spec_draft_tokens_;
  s.spec_accepted_tokens = spec_accepted_tokens_;
  s.spec_accepted_per_pos = spec_accepted_per_pos_;
  const size_t k = static_cast<size_t>(std::max(0, options_.speculative.num_speculative_tokens));
  if (options_.speculative.enabled() && s.spec_accepted_per_pos.size() < k) {
    s.spec_accepted_per_pos.resize(k);
  }
  return s;
}

}  // namespace spark::engine::runtime
