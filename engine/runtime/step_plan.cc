#include "engine/runtime/step_plan.h"

#include <bit>
#include <cstring>
#include <string>

namespace spark::engine::runtime {

namespace {

static_assert(std::endian::native == std::endian::little, "the StepPlan wire is little-endian");

constexpr uint32_t kMagic = 0x314c5053;  // "SPL1"
constexpr uint8_t kFlagNeedsLogits = 1;
constexpr uint8_t kFlagDrafts = 2;  // a u32 num_draft_tokens follows the flags
constexpr uint8_t kFlagPromptLogits = 4;  // a logits row for every token of the entry

class Writer {
 public:
  template <typename T>
  void Put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void PutInts(const std::vector<int32_t>& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    out_.insert(out_.end(), p, p + v.size() * sizeof(int32_t));
  }
  std::vector<uint8_t> Take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& in) : in_(in) {}
  template <typename T>
  Status Get(T* v) {
    SPARK_RETURN_IF_ERROR(Need(sizeof(T)));
    std::memcpy(v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }
  Status GetInts(uint32_t n, std::vector<int32_t>* v) {
    SPARK_RETURN_IF_ERROR(Need(size_t(n) * sizeof(int32_t)));
    v->resize(n);
    if (n > 0) std::memcpy(v->data(), in_.data() + pos_, size_t(n) * sizeof(int32_t));
    pos_ += size_t(n) * sizeof(int32_t);
    return Status::Ok();
  }
  bool done() const { return pos_ == in_.size(); }
  size_t pos() const { return pos_; }

 private:
  Status Need(size_t n) const {
    if (in_.size() - pos_ >= n) return Status::Ok();
    return DataLossError("step plan truncated at byte " + std::to_string(pos_) + " of " +
                         std::to_string(in_.size()));
  }
  const std::vector<uint8_t>& in_;
  size_t pos_ = 0;
};

// A draft command's entry carries its block size as num_draft_tokens (one token, no logits).
Status ReadEntry(Reader& r, bool draft_command, StepPlanEntry* e) {
  uint32_t num_tokens = 0, num_blocks = 0;
  uint8_t flags = 0;
  SPARK_RETURN_IF_ERROR(r.Get(&e->seq_id));
  SPARK_RETURN_IF_ERROR(r.Get(&e->start_pos));
  SPARK_RETURN_IF_ERROR(r.Get(&num_tokens));
  SPARK_RETURN_IF_ERROR(r.Get(&num_blocks));
  SPARK_RETURN_IF_ERROR(r.Get(&flags));
  e->needs_logits = (flags & kFlagNeedsLogits) != 0;
  if ((flags & ~(kFlagNeedsLogits | kFlagDrafts | kFlagPromptLogits)) != 0) {
    return DataLossError("step plan: unknown entry flags " + std::to_string(flags));
  }
  e->prompt_logits = (flags & kFlagPromptLogits) != 0;
  if (e->prompt_logits && (!e->needs_logits || (flags & kFlagDrafts) != 0)) {
    return DataLossError("step plan: sequence " + std::to_string(e->seq_id) +
                         " asks prompt logits without needs_logits or with drafts");
  }
  if ((flags & kFlagDrafts) != 0) {
    uint32_t drafts = 0;
    SPARK_RETURN_IF_ERROR(r.Get(&drafts));
    const bool bad = draft_command ? drafts > 16 || num_tokens != 1
                                   : drafts >= num_tokens || !e->needs_logits;
    if (drafts == 0 || bad) {
      return DataLossError("step plan: sequence " + std::to_string(e->seq_id) + " has " +
                           std::to_string(drafts) + " draft tokens in " +
                           std::to_string(num_tokens) + " tokens");
    }
    e->num_draft_tokens = static_cast<int32_t>(drafts);
  }
  SPARK_RETURN_IF_ERROR(r.GetInts(num_tokens, &e->token_ids));
  return r.GetInts(num_blocks, &e->block_table);
}

}  // namespace

int StepPlan::num_tokens() const {
  int n = 0;
  for (const auto& e : entries) n += static_cast<int>(e.token_ids.size());
  return n;
}

int StepPlan::num_logits_rows() const {
  int n = 0;
  for (const auto& e : entries) n += e.needs_logits ? e.logits_rows() : 0;
  return n;
}

std::vector<uint8_t> StepPlan::Serialize() const {
  Writer w;
  w.Put(kMagic);
  w.Put(static_cast<uint8_t>(command));
  w.Put(step);
  w.Put(static_cast<uint32_t>(entries.size()));
  for (const StepPlanEntry& e : entries) {
    w.Put(e.seq_id);
    w.Put(e.start_pos);
    w.Put(static_cast<uint32_t>(e.token_ids.size()));
    w.Put(static_cast<uint32_t>(e.block_table.size()));
    const bool drafts = e.num_draft_tokens > 0;
    w.Put(static_cast<uint8_t>((e.needs_logits ? kFlagNeedsLogits : 0) |
                               (drafts ? kFlagDrafts : 0) |
                               (e.prompt_logits ? kFlagPromptLogits : 0)));
    if (drafts) w.Put(static_cast<uint32_t>(e.num_draft_tokens));
    w.PutInts(e.token_ids);
    w.PutInts(e.block_table);
  }
  return w.Take();
}

Result<StepPlan> StepPlan::Deserialize(const std::vector<uint8_t>& bytes) {
  Reader r(bytes);
  uint32_t magic = 0, num_entries = 0;
  uint8_t command = 0;
  StepPlan plan;
  SPARK_RETURN_IF_ERROR(r.Get(&magic));
  if (magic != kMagic) return DataLossError("not a step plan (bad magic)");
  SPARK_RETURN_IF_ERROR(r.Get(&command));
  if (command > static_cast<uint8_t>(StepCommand::kDraft)) {
    return DataLossError("step plan: unknown command " + std::to_string(command));
  }
  plan.command = static_cast<StepCommand>(command);
  SPARK_RETURN_IF_ERROR(r.Get(&plan.step));
  SPARK_RETURN_IF_ERROR(r.Get(&num_entries));
  // Each entry takes at least 21 bytes: bounds a corrupt count before reserving.
  if (num_entries > bytes.size() / 21) return DataLossError("step plan: entry count too large");
  plan.entries.resize(num_entries);
  const bool draft = plan.command == StepCommand::kDraft;
  for (StepPlanEntry& e : plan.entries) SPARK_RETURN_IF_ERROR(ReadEntry(r, draft, &e));
  if (!r.done()) {
    return DataLossError("step plan: " + std::to_string(bytes.size() - r.pos()) +
                         " trailing bytes");
  }
  return plan;
}

}  // namespace spark::engine::runtime
