// Sampler: turns one row of logits into the next token of one sequence, on the CPU.
//
// Order: raw logits -> logprobs (reported, from the raw logits) ; logit processing (ProcessLogits:
// logit_bias, min_tokens, a grammar's mask) -> penalties (repetition over
// prompt+output, then presence/frequency over output) -> greedy argmax when temperature == 0,
// else / temperature -> softmax -> top-k -> top-p -> min-p -> draw with the sequence's own RNG.
// The same seed and inputs always give the same token.
// Thread-safety: free functions; the RNG passed in is the caller's.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "base/status.h"
#include "engine/runtime/sampling_params.h"

namespace spark::engine::runtime {

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
  friend bool operator==(const TokenLogprob&, const TokenLogprob&) = default;
};

struct SampleResult {
  int32_t token = 0;
  float logprob = 0.0f;                    // When params.logprobs or top_logprobs > 0.
  std::vector<TokenLogprob> top_logprobs;  // params.top_logprobs entries, most likely first.
  int32_t rank = 0;  // ScoreToken: 1 + the tokens strictly more likely than `token`.
};

// The penalised logits (a copy): repetition penalty over prompt and output tokens, then
// presence and frequency penalties over output tokens.
std::vector<float> ApplyPenalties(std::span<const float> logits, const SamplingParams& params,
                                  std::span<const int32_t> prompt, std::span<const int32_t> output);

// The logits a request samples from, before penalties: params.logit_bias added, the `blocked`
// tokens (EOS and stop ids while fewer than min_tokens were generated) and the tokens outside
// `allowed` (a grammar's bitmask, token_constraint.h; empty = no grammar) set to -inf. When the
// blocked tokens are all the grammar allows (a complete grammar only lets a stop token follow),
// the grammar wins: they stay allowed.
std::vector<float> ProcessLogits(std::span<const float> logits, const SamplingParams& params,
                                 std::span<const int32_t> blocked,
                                 std::span<const uint32_t> allowed);

// Sets result->logprob and top_logprobs (as params asks) from `logits` for result->token.
void FillLogprobs(std::span<const float> logits, const SamplingParams& params,
                  SampleResult* result);

// Prompt scoring: `token`'s log-probability under `logits` (log_softmax over the whole row),
// its rank, and the `top` most likely tokens (ties to the lower id).
SampleResult ScoreToken(std::span<const float> logits, int32_t token, int top);

// log_softmax of `logits`.
std::vector<float> LogSoftmax(std::span<const float> logits);

// The distribution sampled from (temperature > 0): penalised, scaled, masked by top-k, top-p
// and min-p, renormalised; masked tokens have probability 0.
std::vector<float> SamplingProbs(std::span<const float> logits, const SamplingParams& params,
                                 std::span<const int32_t> prompt, std::span<const int32_t> output);

// Draws a token. InvalidArgument for empty logits or a non-finite row.
Result<SampleResult> Sample(std::span<const float> logits, const SamplingParams& params,
                            std::span<const int32_t> prompt, std::span<const int32_t> output,
                            std::mt19937_64& rng);

// Speculative verification of one draft token `draft` proposed by a deterministic drafter
// (its proposal distribution is a point mass on `draft`). Greedy (temperature 0): the target's
// token is the argmax of the penalised logits, and the draft is accepted when it is that token.
// Otherwise the standard rejection rule: accept with probability p(draft) under SamplingProbs;
// on rejection draw from p with draft's mass removed, renormalised. Either way the returned
// token has exactly the target's distribution. result->token is the draft when *accepted.
// InvalidArgument as Sample.
Result<SampleResult> VerifyDraftToken(std::span<const float> logits, const SamplingParams& params,
                                      std::span<const int32_t> prompt,
                                      std::span<const int32_t> output, int32_t draft,
                                      std::mt19937_64& rng, bool* accepted);

}  // namespace spark::engine::runtime
