#include "engine/runtime/scheduler.h"

#include <algorithm>
#include <string>

namespace spark::engine::runtime {

Status SchedulerOptions::Validate() const {
  if (max_num_seqs < 1) return InvalidArgumentError("scheduler: max_num_seqs must be >= 1");
  if (max_num_batched_tokens < 1) {
    return InvalidArgumentError("scheduler: max_num_batched_tokens must be >= 1");
  }
  if (max_model_len < 1) return InvalidArgumentError("scheduler: max_model_len must be >= 1");
  if (max_scored_tokens < 1) {
    return InvalidArgumentError("scheduler: max_scored_tokens must be >= 1");
  }
  if (!enable_chunked_prefill && max_num_batched_tokens < max_model_len) {
    return InvalidArgumentError("scheduler: without chunked prefill, max_num_batched_tokens (" +
                                std::to_string(max_num_batched_tokens) +
                                ") must be >= max_model_len (" + std::to_string(max_model_len) +
                                ")");
  }
  return Status::Ok();
}

Scheduler::Scheduler(const SchedulerOptions& options, BlockManager* blocks)
    : options_(options), blocks_(blocks) {}

void Scheduler::Add(Sequence* seq) {
  seq->set_status(SequenceStatus::kWaiting);
  waiting_.push_back(seq);
}

SchedulerOutput Scheduler::Schedule() {
  SchedulerOutput out;
  scored_left_ = options_.max_scored_tokens;
  int budget = ScheduleRunning(options_.max_num_batched_tokens, &out);
  if (out.preempted.empty() && admit_) budget = AdmitWaiting(budget, &out);
  out.plan = MakePlan(out.scheduled);
  return out;
}

int Scheduler::ScheduleRunning(int budget, SchedulerOutput* out) {
  std::vector<DraftRequest> model_drafts;  // their blocks held; drafted together after the loop
  std::vector<size_t> drafted;             // the index of each in out->scheduled
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    const int n = ChunkSize(*seq, budget);
    if (n == 0) {  // a scored prompt, and this step holds its share of scored rows already
      ++i;
      continue;
    }
    if (!MakeRoom(i, n, out)) continue;      // running_[i] left; i now points past the end or on.
    if (Scored(*seq)) scored_left_ -= n;
    std::vector<int32_t> draft;
    int reserved = 0;  // a model draft's tokens, before it is drafted
    if (drafter_ != nullptr && drafter_->block_tokens() > 0) {
      reserved = HoldDraftBlocks(*seq, budget);
      if (reserved > 0) {
        model_drafts.push_back({seq, reserved});
        drafted.push_back(out->scheduled.size());
      }
    } else {
      draft = Draft(*seq, budget);
    }
    const int total = n + static_cast<int>(draft.size()) + reserved;
    blocks_->Append(*seq, total).IgnoreError();  // MakeRoom and the drafts guaranteed the blocks.
    out->scheduled.push_back({seq, n, std::move(draft)});
    budget -= total;
    ++i;
  }
  if (model_drafts.empty()) return budget;
  std::vector<std::vector<int32_t>> drafts = drafter_->ProposeForAll(model_drafts);
  drafts.resize(model_drafts.size());
  for (size_t k = 0; k < model_drafts.size(); ++k) {
    ScheduledSequence& s = out->scheduled[drafted[k]];
    s.draft = std::move(drafts[k]);
    if (s.draft.size() > static_cast<size_t>(model_drafts[k].max_tokens)) {
      s.draft.resize(model_drafts[k].max_tokens);
    }
    // The block is drafted: give back the blocks the kept draft does not reach, and the budget.
    blocks_->TrimTo(*s.seq, s.seq->num_computed_tokens() + 1 + static_cast<int>(s.draft.size()));
    budget += model_drafts[k].max_tokens - static_cast<int>(s.draft.size());
  }
  return budget;
}

bool Scheduler::MakeRoom(size_t index, int n, SchedulerOutput* out) {
  Sequence* seq = running_[index];
  while (!blocks_->CanAppend(*seq, n)) {
    if (running_.size() == 1) {  // Alone and still too big: it can never fit.
      Finish(seq, FinishReason::kLength);
      out->out_of_memory.push_back(seq);
      return false;
    }
    Sequence* victim = running_.back();
    running_.pop_back();
    Preempt(victim);
    out->preempted.push_back(victim);
    if (victim == seq) return false;
  }
  return true;
}

int Scheduler::DraftRoom(const Sequence& seq, int budget) const {
  if (drafter_ == nullptr || seq.num_uncomputed_tokens() != 1 || seq.num_output_tokens() < 1) {
    return 0;
  }
  // Each accepted draft and the target's own token are output tokens: stay within max_tokens
  // and max_model_len, so a full acceptance ends exactly where a run without drafts would.
  return std::max(0, std::min({num_draft_tokens_, budget - 1,
                               seq.params().max_tokens - seq.num_output_tokens() - 1,
                               options_.max_model_len - seq.num_tokens() - 1}));
}

int Scheduler::HoldDraftBlocks(Sequence& seq, int budget) {
  const int room = DraftRoom(seq, budget);
  if (room < 1) return 0;
  // A model drafter writes its block's state at those positions' slots: hold the blocks first
  // (plain free ones, as for any draft); what the kept draft leaves is given back once drafted.
  const int block = drafter_->block_tokens();
  const int held = std::max(block, 1 + room);
  if (!blocks_->CanAppendWithoutEviction(seq, held)) return 0;
  blocks_->Append(seq, held).IgnoreError();  // checked just above
  return std::min(block, room);
}

std::vector<int32_t> Scheduler::Draft(Sequence& seq, int budget) {
  const int room = DraftRoom(seq, budget);
  if (room < 1) return {};
  std::vector<int32_t> draft = drafter_->ProposeFor(seq, room);
  if (draft.size() > static_cast<size_t>(room)) draft.resize(room);
  // The drafts' blocks must come from plain free blocks: taking a cached one would evict it,
  // a change a rejected draft must not leave behind.
  while (!draft.empty() &&
         !blocks_->CanAppendWithoutEviction(seq, 1 + static_cast<int>(draft.size()))) {
    draft.pop_back();
  }
  return draft;
}

void Scheduler::Preempt(Sequence* seq) {
  blocks_->Free(*seq);
  seq->set_num_computed_tokens(0);
  seq->set_num_cached_tokens(0);
  seq->set_status(SequenceStatus::kWaiting);
  seq->CountPreemption();
  ++num_preemptions_;
  waiting_.push_front(seq);
}

int Scheduler::AdmitWaiting(int budget, SchedulerOutput* out) {
  while (!waiting_.empty() && budget > 0 &&
         static_cast<int>(running_.size()) < options_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    if (Scored(*seq) && scored_left_ == 0) break;  // its rows wait for the next step
    // A prompt being scored needs the logits of every position: its cached prefix is recomputed.
    const int hit = seq->needs_prompt_logits() ? 0 : blocks_->MatchPrefix(*seq);
    seq->set_num_computed_tokens(hit);
    const int n = ChunkSize(*seq, budget);
    const bool whole = n == seq->num_uncomputed_tokens();
    if ((!options_.enable_chunked_prefill && !whole) || !blocks_->CanAppend(*seq, n)) {
      blocks_->Free(*seq);  // Gives back the prefix blocks; they stay cached.
      seq->set_num_computed_tokens(0);
      if (!running_.empty()) break;
      // Nothing else holds blocks, so it can never fit: end it rather than wait forever.
      waiting_.pop_front();
      seq->Finish(FinishReason::kLength);
      out->out_of_memory.push_back(seq);
      continue;
    }
    blocks_->Append(*seq, n).IgnoreError();  // CanAppend checked above.
    blocks_->RecordPrefixLookup(seq->num_tokens(), hit);
    seq->set_num_cached_tokens(hit);
    seq->set_status(SequenceStatus::kRunning);
    waiting_.pop_front();
    running_.push_back(seq);
    out->scheduled.push_back({seq, n});
    if (Scored(*seq)) scored_left_ -= n;
    budget -= n;
  }
  return budget;
}

int Scheduler::ChunkSize(const Sequence& seq, int budget) const {
  int n = std::min(seq.num_uncomputed_tokens(), budget);
  if (Scored(seq)) n = std::min(n, scored_left_);
  return n;
}

StepPlan Scheduler::MakePlan(const std::vector<ScheduledSequence>& scheduled) {
  StepPlan plan;
  plan.step = step_++;
  for (const ScheduledSequence& s : scheduled) {
    const Sequence& seq = *s.seq;
    const int start = seq.num_computed_tokens();
    StepPlanEntry e;
    e.seq_id = seq.id();
    e.start_pos = start;
    e.token_ids.assign(seq.token_ids().begin() + start,
                       seq.token_ids().begin() + start + s.num_new_tokens);
    e.token_ids.insert(e.token_ids.end(), s.draft.begin(), s.draft.end());
    e.num_draft_tokens = static_cast<int32_t>(s.draft.size());
    e.block_table = seq.block_table();
    e.prompt_logits = seq.needs_prompt_logits() && s.draft.empty();
    e.needs_logits = e.prompt_logits || start + s.num_new_tokens == seq.num_tokens();
    plan.entries.push_back(std::move(e));
  }
  return plan;
}

void Scheduler::Commit(const SchedulerOutput& output) {
  for (const ScheduledSequence& s : output.scheduled) {
    if (s.seq->status() != SequenceStatus::kRunning) continue;
    s.seq->set_num_computed_tokens(s.seq->num_computed_tokens() + s.num_new_tokens);
    blocks_->CommitComputed(*s.seq);
  }
}

void Scheduler::CommitDraft(Sequence* seq, int accepted) {
  if (seq->status() != SequenceStatus::kRunning) return;  // finished: its blocks are gone
  seq->set_num_computed_tokens(seq->num_computed_tokens() + accepted);
  blocks_->TrimTo(*seq, seq->num_computed_tokens());
  blocks_->CommitComputed(*seq);
}

void Scheduler::Finish(Sequence* seq, FinishReason reason) {
  auto it = std::find(running_.begin(), running_.end(), seq);
  if (it != running_.end()) running_.erase(it);
  auto wit = std::find(waiting_.begin(), waiting_.end(), seq);
  if (wit != waiting_.end()) waiting_.erase(wit);
  blocks_->Free(*seq);
  seq->Finish(reason);
}

}  // namespace spark::engine::runtime
