#include "engine/grammar/xgrammar_constraint.h"

#include <exception>

namespace spark::engine::grammar {

XgrammarSpec::XgrammarSpec(xgrammar::CompiledGrammar compiled, std::string what, int vocab_size,
                           bool terminate_without_stop)
    : compiled_(std::move(compiled)),
      what_(std::move(what)),
      vocab_size_(vocab_size),
      terminate_without_stop_(terminate_without_stop) {}

Result<std::unique_ptr<runtime::TokenConstraint>> XgrammarSpec::NewConstraint() const {
  try {
    return std::unique_ptr<runtime::TokenConstraint>(
        new XgrammarConstraint(xgrammar::GrammarMatcher(compiled_, std::nullopt,
                                                        terminate_without_stop_),
                               vocab_size_));
  } catch (const std::exception& e) {
    return InternalError(std::string("grammar matcher: ") + e.what());
  }
}

XgrammarConstraint::XgrammarConstraint(xgrammar::GrammarMatcher matcher, int vocab_size)
    : matcher_(std::move(matcher)), vocab_size_(vocab_size) {}

Status XgrammarConstraint::FillNextTokenMask(std::span<uint32_t> mask) {
  if (mask.size() != static_cast<size_t>(runtime::MaskWords(vocab_size_))) {
    return InternalError("grammar mask: " + std::to_string(mask.size()) + " words, expected " +
                         std::to_string(runtime::MaskWords(vocab_size_)));
  }
  int64_t shape = static_cast<int64_t>(mask.size());
  DLTensor t{};
  t.data = mask.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = xgrammar::GetBitmaskDLType();
  t.shape = &shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  try {
    matcher_.FillNextTokenBitmask(&t);
  } catch (const std::exception& e) {
    return InternalError(std::string("grammar mask: ") + e.what());
  }
  return Status::Ok();
}

Status XgrammarConstraint::Accept(int32_t token) {
  try {
    if (!matcher_.AcceptToken(token)) {
      return InvalidArgumentError("the grammar does not allow token " + std::to_string(token) +
                                  " here");
    }
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("grammar: ") + e.what());
  }
  ++accepted_;
  return Status::Ok();
}

Status XgrammarConstraint::Rollback(int num_tokens) {
  if (num_tokens < 0 || num_tokens > accepted_) {
    return InvalidArgumentError("grammar rollback of " + std::to_string(num_tokens) +
                                " tokens; " + std::to_string(accepted_) + " were accepted");
  }
  try {
    matcher_.Rollback(num_tokens);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("grammar rollback: ") + e.what());
  }
  accepted_ -= num_tokens;
  return Status::Ok();
}

bool XgrammarConstraint::IsTerminated() const { return matcher_.IsTerminated(); }

}  // namespace spark::engine::grammar
