#include "engine/grammar/grammar_compiler.h"

#include <xgrammar/compiler.h>
#include <xgrammar/grammar.h>
#include <xgrammar/tokenizer_info.h>

#include <cstdio>
#include <exception>

#include "engine/grammar/json_schema_check.h"
#include "engine/grammar/xgrammar_constraint.h"

namespace spark::engine::grammar {
namespace {

using Kind = ConstraintRequest::Kind;

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kJsonObject:
      return "json_object";
    case Kind::kJsonSchema:
      return "json_schema";
    case Kind::kRegex:
      return "regex";
    case Kind::kChoice:
      return "choice";
    case Kind::kGrammar:
      return "grammar";
    case Kind::kToolCall:
      return "tool_call";
  }
  return "";
}

// Whitespace between JSON tokens, at most this many characters in a row: enough for any
// indentation a model writes, and a model cannot loop on spaces or newlines.
constexpr int kMaxWhitespaceRun = 20;

xgrammar::Grammar Literal(const std::string& text) {
  return xgrammar::Grammar::FromEBNF("root ::= " + EbnfLiteral(text));
}

}  // namespace

std::string EbnfLiteral(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;  // UTF-8 passes through; the grammar parser reads it as code points.
    }
  }
  return out + "\"";
}

struct GrammarCompiler::Impl {
  Impl(xgrammar::TokenizerInfo info, int threads) : compiler(info, threads) {}
  xgrammar::GrammarCompiler compiler;
  int vocab_size = 0;
  bool terminate_without_stop = false;  // The vocabulary has no stop token.

  xgrammar::CompiledGrammar CompileToolCalls(const ConstraintRequest& r) {
    std::vector<xgrammar::Grammar> forms;
    for (const ToolCallForm& f : r.calls) {
      std::vector<xgrammar::Grammar> parts;
      if (!f.prefix.empty()) parts.push_back(Literal(f.prefix));
      parts.push_back(xgrammar::Grammar::FromJSONSchema(f.parameters.dump(), r.any_whitespace,
                                                        std::nullopt, std::nullopt, true,
                                                        kMaxWhitespaceRun));
      if (!f.suffix.empty()) parts.push_back(Literal(f.suffix));
      forms.push_back(parts.size() == 1 ? parts[0] : xgrammar::Grammar::Concat(parts));
    }
    return compiler.CompileGrammar(forms.size() == 1 ? forms[0]
                                                     : xgrammar::Grammar::Union(forms));
  }

  xgrammar::CompiledGrammar CompileChoice(const ConstraintRequest& r) {
    std::string ebnf = "root ::= ";
    for (size_t i = 0; i < r.choices.size(); ++i) {
      ebnf += (i ? " | " : "") + EbnfLiteral(r.choices[i]);
    }
    return compiler.CompileGrammar(ebnf);
  }
};

GrammarCompiler::GrammarCompiler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrammarCompiler::~GrammarCompiler() = default;

Result<std::unique_ptr<GrammarCompiler>> GrammarCompiler::Create(
    const GrammarVocabulary& vocabulary, int threads) {
  if (vocabulary.tokens.empty() ||
      vocabulary.vocab_size < static_cast<int>(vocabulary.tokens.size())) {
    return InvalidArgumentError("grammar vocabulary: " + std::to_string(vocabulary.tokens.size()) +
                                " tokens for " + std::to_string(vocabulary.vocab_size) +
                                " logit rows");
  }
  try {
    xgrammar::TokenizerInfo info(vocabulary.tokens, xgrammar::VocabType::RAW,
                                 vocabulary.vocab_size, vocabulary.stop_ids);
    auto impl = std::make_unique<Impl>(std::move(info), std::max(1, threads));
    impl->vocab_size = vocabulary.vocab_size;
    impl->terminate_without_stop = vocabulary.stop_ids.empty();
    return std::unique_ptr<GrammarCompiler>(new GrammarCompiler(std::move(impl)));
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("grammar vocabulary: ") + e.what());
  }
}

int GrammarCompiler::vocab_size() const { return impl_->vocab_size; }

Result<std::shared_ptr<const runtime::ConstraintSpec>> GrammarCompiler::Compile(
    const ConstraintRequest& r) const {
  switch (r.kind) {
    case Kind::kJsonSchema:
      SPARK_RETURN_IF_ERROR(CheckJsonSchema(r.schema, r.param));
      break;
    case Kind::kToolCall:
      if (r.calls.empty()) return InvalidArgumentError(r.param + ": no tool to call");
      for (const ToolCallForm& f : r.calls) {
        SPARK_RETURN_IF_ERROR(CheckJsonSchema(f.parameters, f.parameters_param));
      }
      break;
    case Kind::kChoice:
      if (r.choices.empty()) return InvalidArgumentError(r.param + ": give at least one choice");
      break;
    case Kind::kRegex:
    case Kind::kGrammar:
      if (r.text.empty()) return InvalidArgumentError(r.param + ": must not be empty");
      break;
    case Kind::kJsonObject:
      break;
  }
  try {
    xgrammar::CompiledGrammar compiled = [&] {
      switch (r.kind) {
        case Kind::kJsonObject:  // Any JSON object (not strict: any properties).
          return impl_->compiler.CompileJSONSchema(R"({"type": "object"})", r.any_whitespace,
                                                   std::nullopt, std::nullopt,
                                                   /*strict_mode=*/false, kMaxWhitespaceRun);
        case Kind::kJsonSchema:  // Strict: properties the schema does not list never appear.
          return impl_->compiler.CompileJSONSchema(r.schema.dump(), r.any_whitespace,
                                                   std::nullopt, std::nullopt,
                                                   /*strict_mode=*/true, kMaxWhitespaceRun);
        case Kind::kRegex:
          return impl_->compiler.CompileRegex(r.text);
        case Kind::kChoice:
          return impl_->CompileChoice(r);
        case Kind::kGrammar:
          return impl_->compiler.CompileGrammar(r.text);
        case Kind::kToolCall:
          return impl_->CompileToolCalls(r);
      }
      return impl_->compiler.CompileBuiltinJSONGrammar();
    }();
    return std::shared_ptr<const runtime::ConstraintSpec>(
        std::make_shared<XgrammarSpec>(std::move(compiled), KindName(r.kind), impl_->vocab_size,
                                       impl_->terminate_without_stop));
  } catch (const std::exception& e) {
    const char* what = r.kind == Kind::kGrammar ? "not a grammar in xgrammar's EBNF"
                       : r.kind == Kind::kRegex ? "not a regular expression the grammar supports"
                                                : "cannot be turned into a grammar";
    return InvalidArgumentError(r.param + ": " + what + ": " + FirstLine(e.what()));
  }
}

}  // namespace spark::engine::grammar
