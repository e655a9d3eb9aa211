// The quality gate of `sparkctl check --quality`: the served model's perplexity on a text the
// profile names, measured through the endpoint's prompt scoring (/tokenize, then /v1/completions
// with echo, logprobs and max_tokens 0), compared with the reference the profile records
// (`quality: {text, perplexity, tolerance, context}`, docs/evaluation.md). A broken kernel, a
// wrong quantization or a wrong tokenizer moves the number.
//
// Windows, as `spark-engine perplexity` and scripts/quality_reference.py cut them: the text's
// tokens (no special tokens) in consecutive windows of `context` tokens, every token but each
// window's first scored; perplexity = exp(-sum log p / scored tokens).
// Thread-safety: functions over values.
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "sparkctl/serving/acceptance.h"
#include "sparkctl/serving/openai_api.h"

namespace spark::serving {

struct QualityReference {
  std::string text_file;   // the text to score (resolved path)
  double perplexity = 0;   // the reference
  double tolerance = 0;    // relative: |measured - reference| <= tolerance * reference
  int context = 512;       // tokens per window
};

struct PerplexityMeasure {
  int64_t tokens = 0;
  int64_t scored_tokens = 0;
  double mean_nll = 0;
  double perplexity = 0;
  double seconds = 0;
};

// Scores `text` on the endpoint in windows of `context` tokens. InvalidArgument for a text of
// under 2 tokens; Unavailable / the server's error (naming the HTTP status) otherwise.
Result<PerplexityMeasure> MeasurePerplexity(const Endpoint& endpoint, const std::string& text,
                                            int context, std::chrono::milliseconds timeout);

// The `quality` check: pass within tolerance, fail with both numbers; "no reference" (not
// judged) when the profile records none (`reference` unset), naming `profile_file`.
CheckResult QualityCheck(const Endpoint& endpoint, const std::optional<QualityReference>& reference,
                         const std::string& profile_file, std::chrono::milliseconds timeout);

}  // namespace spark::serving
