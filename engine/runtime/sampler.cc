#include "engine/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

namespace spark::engine::runtime {

namespace {

bool InVocab(int32_t t, size_t vocab) { return t >= 0 && static_cast<size_t>(t) < vocab; }

// Token ids sorted by probability, most likely first; ties by lower id.
std::vector<int32_t> SortedByProb(const std::vector<float>& probs) {
  std::vector<int32_t> order(probs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return probs[a] > probs[b]; });
  return order;
}

void Normalise(std::vector<float>* probs) {
  double total = 0.0;
  for (float p : *probs) total += p;
  if (total <= 0.0) return;
  for (float& p : *probs) p = static_cast<float>(p / total);
}

void MaskTopKTopP(std::vector<float>* probs, int top_k, float top_p) {
  const size_t vocab = probs->size();
  const bool use_k = top_k > 0 && static_cast<size_t>(top_k) < vocab;
  if (!use_k && top_p >= 1.0f) return;
  const std::vector<int32_t> order = SortedByProb(*probs);
  const size_t keep_k = use_k ? static_cast<size_t>(top_k) : vocab;
  double kept_mass = 0.0;
  for (size_t i = 0; i < keep_k; ++i) kept_mass += (*probs)[order[i]];
  double cumulative = 0.0;  // Of the top-k renormalised distribution.
  for (size_t i = 0; i < vocab; ++i) {
    float& p = (*probs)[order[i]];
    const bool keep = i < keep_k && (i == 0 || cumulative < top_p);
    cumulative += kept_mass > 0.0 ? p / kept_mass : 0.0;
    if (!keep) p = 0.0f;
  }
}

void MaskMinP(std::vector<float>* probs, float min_p) {
  if (min_p <= 0.0f) return;
  const float threshold = min_p * *std::max_element(probs->begin(), probs->end());
  for (float& p : *probs) {
    if (p < threshold) p = 0.0f;
  }
}

int32_t Argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// A uniform double in [0, 1) from 53 random bits: identical on every platform.
double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

int32_t Draw(const std::vector<float>& probs, std::mt19937_64& rng) {
  const double u = Uniform(rng);
  double cumulative = 0.0;
  int32_t last = 0;
  for (size_t t = 0; t < probs.size(); ++t) {
    if (probs[t] <= 0.0f) continue;
    cumulative += probs[t];
    last = static_cast<int32_t>(t);
    if (u < cumulative) return last;
  }
  return last;  // Rounding left u above the total.
}

}  // namespace

std::vector<float> ApplyPenalties(std::span<const float> logits, const SamplingParams& params,
                                  std::span<const int32_t> prompt,
                                  std::span<const int32_t> output) {
  std::vector<float> out(logits.begin(), logits.end());
  if (params.repetition_penalty != 1.0f) {
    std::unordered_set<int32_t> seen(prompt.begin(), prompt.end());
    seen.insert(output.begin(), output.end());
    for (int32_t t : seen) {
      if (!InVocab(t, out.size())) continue;
      float& l = out[t];
      l = l > 0.0f ? l / params.repetition_penalty : l * params.repetition_penalty;
    }
  }
  if (params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f) {
    std::unordered_map<int32_t, int> counts;
    for (int32_t t : output) ++counts[t];
    for (const auto& [t, c] : counts) {
      if (!InVocab(t, out.size())) continue;
      out[t] -= params.presence_penalty + params.frequency_penalty * static_cast<float>(c);
    }
  }
  return out;
}

void FillLogprobs(std::span<const float> logits, const SamplingParams& params,
                  SampleResult* result) {
  result->top_logprobs.clear();
  if (!params.logprobs && params.top_logprobs == 0) return;
  const std::vector<float> lp = LogSoftmax(logits);
  result->logprob = lp[result->token];
  const size_t n = std::min<size_t>(params.top_logprobs, lp.size());
  std::vector<int32_t> order(lp.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](int32_t a, int32_t b) {
    return lp[a] > lp[b] || (lp[a] == lp[b] && a < b);
  });
  for (size_t i = 0; i < n; ++i) result->top_logprobs.push_back({order[i], lp[order[i]]});
}

SampleResult ScoreToken(std::span<const float> logits, int32_t token, int top) {
  // One row per prompt token: no copies of the row, a pass for the max, one for the sum and the
  // rank, and a small ordered list for the top alternatives (k <= 20).
  SampleResult r;
  r.token = token;
  const float max = *std::max_element(logits.begin(), logits.end());
  const float own = logits[token];
  double sum = 0.0;
  int32_t above = 0;
  for (float l : logits) {  // float exp (as fast as the row is long), double sum
    sum += static_cast<double>(std::exp(l - max));
    above += l > own ? 1 : 0;
  }
  const float log_sum = static_cast<float>(std::log(sum)) + max;
  r.logprob = own - log_sum;
  r.rank = 1 + above;
  const size_t k = std::min<size_t>(static_cast<size_t>(std::max(top, 0)), logits.size());
  if (k == 0) return r;
  // Most likely first, ties to the lower id (as FillLogprobs orders them).
  auto before = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::vector<int32_t> best;
  best.reserve(k + 1);
  for (int32_t id = 0; id < static_cast<int32_t>(logits.size()); ++id) {
    if (best.size() == k && !before(id, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), id, before), id);
    if (best.size() > k) best.pop_back();
  }
  for (int32_t id : best) r.top_logprobs.push_back({id, logits[id] - log_sum});
  return r;
}

std::vector<float> ProcessLogits(std::span<const float> logits, const SamplingParams& params,
                                 std::span<const int32_t> blocked,
                                 std::span<const uint32_t> allowed) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  std::vector<float> out(logits.begin(), logits.end());
  const size_t vocab = out.size();
  for (const auto& [token, bias] : params.logit_bias) {
    if (InVocab(token, vocab)) out[token] += bias;
  }
  const bool has_mask = allowed.size() * 32 >= vocab;
  bool other_allowed = !has_mask;  // Some token besides the blocked ones stays possible.
  if (has_mask) {
    for (size_t t = 0; t < vocab; ++t) {
      if (!MaskAllows(allowed, static_cast<int32_t>(t))) {
        out[t] = kNegInf;
      } else if (!other_allowed && std::find(blocked.begin(), blocked.end(),
                                             static_cast<int32_t>(t)) == blocked.end()) {
        other_allowed = true;
      }
    }
  }
  if (other_allowed) {
    for (int32_t t : blocked) {
      if (InVocab(t, vocab)) out[t] = kNegInf;
    }
  }
  return out;
}

std::vector<float> LogSoftmax(std::span<const float> logits) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - max));
  const float log_sum = static_cast<float>(std::log(sum)) + max;
  std::vector<float> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - log_sum;
  return out;
}

std::vector<float> SamplingProbs(std::span<const float> logits, const SamplingParams& params,
                                 std::span<const int32_t> prompt, std::span<const int32_t> output) {
  std::vector<float> scaled = ApplyPenalties(logits, params, prompt, output);
  const float temperature = params.temperature > 0.0f ? params.temperature : 1.0f;
  for (float& l : scaled) l /= temperature;
  const std::vector<float> lp = LogSoftmax(scaled);
  std::vector<float> probs(lp.size());
  for (size_t i = 0; i < lp.size(); ++i) probs[i] = std::exp(lp[i]);
  MaskTopKTopP(&probs, params.top_k, params.top_p);
  MaskMinP(&probs, params.min_p);
  Normalise(&probs);
  return probs;
}

static Status CheckRow(std::span<const float> logits) {
  if (logits.empty()) return InvalidArgumentError("sampler: empty logits row");
  for (float l : logits) {
    if (std::isnan(l) || l == std::numeric_limits<float>::infinity()) {
      return InvalidArgumentError("sampler: logits row holds NaN or +inf");
    }
  }
  return Status::Ok();
}

Result<SampleResult> VerifyDraftToken(std::span<const float> logits, const SamplingParams& params,
                                      std::span<const int32_t> prompt,
                                      std::span<const int32_t> output, int32_t draft,
                                      std::mt19937_64& rng, bool* accepted) {
  SPARK_RETURN_IF_ERROR(CheckRow(logits));
  SampleResult result;
  if (params.temperature == 0.0f) {
    result.token = Argmax(ApplyPenalties(logits, params, prompt, output));
    *accepted = result.token == draft;
  } else {
    std::vector<float> probs = SamplingProbs(logits, params, prompt, output);
    const bool in_vocab = InVocab(draft, probs.size());
    // Accept with probability min(1, p(draft) / q(draft)) = p(draft), q a point mass.
    *accepted = in_vocab && probs[draft] > 0.0f && Uniform(rng) < probs[draft];
    if (*accepted) {
      result.token = draft;
    } else {
      // The residual max(0, p - q) renormalised: p without the draft's mass.
      if (in_vocab) probs[draft] = 0.0f;
      Normalise(&probs);
      result.token = Draw(probs, rng);
    }
  }
  FillLogprobs(logits, params, &result);
  return result;
}

Result<SampleResult> Sample(std::span<const float> logits, const SamplingParams& params,
                            std::span<const int32_t> prompt, std::span<const int32_t> output,
                            std::mt19937_64& rng) {
  SPARK_RETURN_IF_ERROR(CheckRow(logits));
  SampleResult result;
  if (params.temperature == 0.0f) {
    result.token = Argmax(ApplyPenalties(logits, params, prompt, output));
  } else {
    result.token = Draw(SamplingProbs(logits, params, prompt, output), rng);
  }
  FillLogprobs(logits, params, &result);
  return result;
}

}  // namespace spark::engine::runtime
