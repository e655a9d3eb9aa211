#include "engine/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace spark::tokenizer {

struct RegexSplit::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

namespace {

// Per-thread match state: match data and a JIT stack large enough for long whitespace runs.
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  MatchScratch() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

MatchScratch& Scratch() {
  thread_local MatchScratch scratch;
  return scratch;
}

std::string PcreMessage(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

Result<RegexSplit> RegexSplit::Create(const std::string& pattern, bool is_regex,
                                      SplitBehavior behavior) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | (is_regex ? 0 : PCRE2_LITERAL);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &error, &offset, nullptr);
  if (code == nullptr) {
    return InvalidArgumentError("regex does not compile at offset " + std::to_string(offset) +
                                ": " + PcreMessage(error));
  }
  auto compiled = std::make_shared<Compiled>();
  compiled->code = code;
  compiled->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  RegexSplit split;
  split.compiled_ = std::move(compiled);
  split.behavior_ = behavior;
  return split;
}

Status RegexSplit::Split(std::string_view text, std::vector<std::string_view>& out) const {
  MatchScratch& scratch = Scratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t last = 0;
  size_t start = 0;
  while (start < text.size()) {
    const int rc = compiled_->jit
                       ? pcre2_jit_match(compiled_->code, subject, text.size(), start, 0,
                                         scratch.data, scratch.context)
                       : pcre2_match(compiled_->code, subject, text.size(), start,
                                     PCRE2_NO_UTF_CHECK, scratch.data, scratch.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return InternalError("pre-tokenizer regex failed: " + PcreMessage(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.data);
    if (ov[1] == ov[0]) {  // empty match: step over one character
      start = ov[1] + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
        ++start;
      }
      continue;
    }
    if (ov[0] > last) out.push_back(text.substr(last, ov[0] - last));
    if (behavior_ == SplitBehavior::kIsolated) out.push_back(text.substr(ov[0], ov[1] - ov[0]));
    last = start = ov[1];
  }
  if (last < text.size()) out.push_back(text.substr(last));
  return Status::Ok();
}

Result<std::vector<std::string_view>> PreTokenizer::Split(std::string_view text) const {
  std::vector<std::string_view> pieces{text};
  std::vector<std::string_view> next;
  for (const RegexSplit& step : steps_) {
    next.clear();
    for (std::string_view piece : pieces) SPARK_RETURN_IF_ERROR(step.Split(piece, next));
    pieces.swap(next);
  }
  if (!text.empty() || !pieces.empty()) {
    std::erase_if(pieces, [](std::string_view p) { return p.empty(); });
  }
  return pieces;
}

}  // namespace spark::tokenizer
