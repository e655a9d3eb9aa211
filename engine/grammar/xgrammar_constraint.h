// The runtime's ConstraintSpec / TokenConstraint over xgrammar: a compiled grammar shared by the
// requests that use it, and one GrammarMatcher per sequence. Every library exception is caught
// here and becomes a Status.
// Thread-safety: XgrammarSpec is immutable; an XgrammarConstraint is used by one thread at a time.
#pragma once

#include <xgrammar/compiler.h>
#include <xgrammar/matcher.h>

#include <memory>
#include <string>

#include "engine/runtime/token_constraint.h"

namespace spark::engine::grammar {

class XgrammarSpec : public runtime::ConstraintSpec {
 public:
  // `terminate_without_stop`: the grammar ends when its root is complete (for vocabularies with
  // no stop token; otherwise a stop token after the complete grammar ends it).
  XgrammarSpec(xgrammar::CompiledGrammar compiled, std::string what, int vocab_size,
               bool terminate_without_stop);
  Result<std::unique_ptr<runtime::TokenConstraint>> NewConstraint() const override;
  std::string Describe() const override { return what_; }

 private:
  const xgrammar::CompiledGrammar compiled_;
  const std::string what_;
  const int vocab_size_;
  const bool terminate_without_stop_;
};

class XgrammarConstraint : public runtime::TokenConstraint {
 public:
  XgrammarConstraint(xgrammar::GrammarMatcher matcher, int vocab_size);
  Status FillNextTokenMask(std::span<uint32_t> mask) override;
  Status Accept(int32_t token) override;
  Status Rollback(int num_tokens) override;
  bool IsTerminated() const override;

 private:
  xgrammar::GrammarMatcher matcher_;
  const int vocab_size_;
  int accepted_ = 0;  // Tokens accepted and not rolled back.
};

}  // namespace spark::engine::grammar
