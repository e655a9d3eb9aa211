// GrammarCompiler: structured-output requests (response_format, vLLM's structured_outputs, forced
// tool calls) compiled into grammars over the model's vocabulary, by xgrammar's C++ core
// (Apache-2.0, built from its pinned source release: docs/structured-output.md). The result is a
// runtime::ConstraintSpec the engine's sampler masks logits with (token_constraint.h).
// JSON Schemas are checked first (json_schema_check.h), so what the grammar would drop is refused
// by name. Compiled grammars are cached by the library (same schema, one compile).
// Thread-safety: Compile may be called from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/runtime/token_constraint.h"

namespace spark::engine::grammar {

// The model's vocabulary as the grammar sees it.
struct GrammarVocabulary {
  // Each token's bytes, by id. "" marks a control token (an added token such as <|im_end|> or
  // <tool_call>) that grammar text never contains; stop ids are allowed once the grammar is
  // complete.
  std::vector<std::string> tokens;
  // The model's logit rows (>= tokens.size(); the extra rows are never allowed).
  int vocab_size = 0;
  // Tokens that end a turn: allowed once the grammar is complete, and the output ends with one.
  // None: the output ends where the grammar completes.
  std::vector<int32_t> stop_ids;
};

// One way to call a tool: `prefix` (the function name in the chat format's markup), the
// arguments as JSON following `parameters`, then `suffix`.
struct ToolCallForm {
  std::string prefix;
  nlohmann::ordered_json parameters;
  std::string parameters_param;  // Where the schema came from: "tools[1].function.parameters".
  std::string suffix;
};

struct ConstraintRequest {
  enum class Kind { kJsonObject, kJsonSchema, kRegex, kChoice, kGrammar, kToolCall };
  Kind kind = Kind::kJsonObject;
  // The request field it came from, named in errors ("response_format.json_schema.schema").
  std::string param;
  nlohmann::ordered_json schema;      // kJsonSchema
  std::string text;                   // kRegex (the pattern), kGrammar (xgrammar's EBNF)
  std::vector<std::string> choices;   // kChoice: the output is exactly one of them
  std::vector<ToolCallForm> calls;    // kToolCall: exactly one of them
  // JSON may hold any whitespace between tokens (vLLM's default); false: none.
  bool any_whitespace = true;
};

class GrammarCompiler {
 public:
  // InvalidArgument for an empty vocabulary or a vocab_size below its token count.
  static Result<std::unique_ptr<GrammarCompiler>> Create(const GrammarVocabulary& vocabulary,
                                                         int threads = 4);
  ~GrammarCompiler();

  // InvalidArgument naming request.param (and, for schemas, the JSON Pointer inside) for a bad
  // or unsupported request.
  Result<std::shared_ptr<const runtime::ConstraintSpec>> Compile(
      const ConstraintRequest& request) const;

  int vocab_size() const;

 private:
  struct Impl;
  explicit GrammarCompiler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// `text` as an EBNF string literal of the grammar library ("a\"b").
std::string EbnfLiteral(std::string_view text);

}  // namespace spark::engine::grammar
