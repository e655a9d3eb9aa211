// SamplingParams: how one request turns logits into tokens and when it stops. Plain data with
// in-class defaults (the OpenAI defaults) and one Validate().
// Thread-safety: a value.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/runtime/token_constraint.h"

namespace spark::engine::runtime {

struct SamplingParams {
  // 0 = greedy (argmax, ties to the lowest id). Default 1.
  float temperature = 1.0f;
  // Keep the k most likely tokens; <= 0 disables. Default off.
  int top_k = 0;
  // Keep the smallest set of most likely tokens whose probability reaches top_p. Default 1 (off).
  float top_p = 1.0f;
  // Drop tokens less likely than min_p times the most likely one. Default 0 (off).
  float min_p = 0.0f;
  // Seeds this request's own RNG: same seed, same prompt -> same output. Unset = engine seed.
  std::optional<uint64_t> seed;
  // OpenAI penalties over generated tokens: logit -= presence * [count > 0] + frequency * count.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // HF/CTRL penalty over prompt and generated tokens: positive logits / p, negative * p. 1 = off.
  float repetition_penalty = 1.0f;
  // Return the sampled token's log-probability (from the raw logits) ...
  bool logprobs = false;
  // ... and this many most likely alternatives (0-20).
  int top_logprobs = 0;
  // vLLM's prompt_logprobs: the log-probability of every prompt token after the first, given
  // the tokens before it (teacher-forced, from the raw logits), with this many most likely
  // alternatives (0-20); -1 (the default) computes none, at no cost. Such a request skips the
  // prefix cache: every prompt position is run to get its logits.
  int prompt_logprobs = -1;
  // Generated tokens at most. Default 16 (as OpenAI's completions API). 0 only with
  // prompt_logprobs: the prompt is scored and nothing is generated.
  int max_tokens = 16;
  // Tokens that end generation (besides EOS unless ignore_eos).
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  // Strings that end generation; matched by the caller on detokenized text (stop_strings.h).
  std::vector<std::string> stop;
  // Added to these tokens' logits before anything else (OpenAI's logit_bias), in [-100, 100].
  std::vector<std::pair<int32_t, float>> logit_bias;
  // EOS and stop_token_ids cannot be sampled before this many tokens were generated (vLLM's
  // min_tokens); at most max_tokens. Default 0.
  int min_tokens = 0;
  // Structured output: the grammar the generated tokens must follow (null: none) and when it
  // starts (after a think block).
  std::shared_ptr<const ConstraintSpec> constraint;
  ConstraintGate constraint_gate;

  bool scores_prompt() const { return prompt_logprobs >= 0; }

  // Whether anything changes the logits before sampling (bias, min_tokens, a grammar).
  bool ProcessesLogits() const {
    return !logit_bias.empty() || min_tokens > 0 || constraint != nullptr;
  }

  // InvalidArgument naming the field and its accepted range.
  Status Validate() const;
};

}  // namespace spark::engine::runtime
