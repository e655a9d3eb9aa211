#include "sparkctl/serving/quality.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "base/strings.h"

namespace spark::serving {
namespace {

using nlohmann::json;

Status HttpError(const std::string& what, const JsonReply& r) {
  std::string message = r.raw;
  if (r.body.is_object() && r.body.contains("error") && r.body["error"].is_object()) {
    message = r.body["error"].value("message", r.raw);
  }
  return UnavailableError(what + ": HTTP " + std::to_string(r.status) + ": " + ClipText(message, 200));
}

Result<std::vector<int32_t>> Tokenize(const Endpoint& e, const std::string& text,
                                      std::chrono::milliseconds timeout) {
  SPARK_ASSIGN_OR_RETURN(
      JsonReply r, PostJson(e, "/tokenize",
                            {{"model", e.model}, {"prompt", text}, {"add_special_tokens", false}},
                            timeout));
  if (r.status != 200 || !r.body.is_object() || !r.body.contains("tokens")) {
    return HttpError("/tokenize", r);
  }
  return r.body["tokens"].get<std::vector<int32_t>>();
}

// The sum of log p over every token of `ids` but the first.
Result<double> ScoreWindow(const Endpoint& e, const std::vector<int32_t>& ids,
                           std::chrono::milliseconds timeout) {
  SPARK_ASSIGN_OR_RETURN(JsonReply r,
                         PostJson(e, "/v1/completions",
                                  {{"model", e.model},
                                   {"prompt", ids},
                                   {"max_tokens", 0},
                                   {"echo", true},
                                   {"logprobs", 0},
                                   {"temperature", 0}},
                                  timeout));
  if (r.status != 200) return HttpError("/v1/completions (echo, logprobs, max_tokens 0)", r);
  const json& lp = r.body["choices"][0]["logprobs"]["token_logprobs"];
  if (!lp.is_array() || lp.size() != ids.size()) {
    return InternalError("/v1/completions: " + std::to_string(lp.size()) +
                         " token_logprobs for a prompt of " + std::to_string(ids.size()) +
                         " tokens; the server does not score prompts (echo + logprobs)");
  }
  double sum = 0;
  for (size_t i = 1; i < lp.size(); ++i) {
    if (!lp[i].is_number()) return InternalError("/v1/completions: a prompt token has no logprob");
    sum += lp[i].get<double>();
  }
  return sum;
}

Result<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path + ": cannot read the quality text");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

Result<PerplexityMeasure> MeasurePerplexity(const Endpoint& endpoint, const std::string& text,
                                            int context, std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  SPARK_ASSIGN_OR_RETURN(std::vector<int32_t> ids, Tokenize(endpoint, text, timeout));
  if (ids.size() < 2) return InvalidArgumentError("the quality text is under 2 tokens");
  if (context < 2) return InvalidArgumentError("quality.context must be >= 2");
  PerplexityMeasure m;
  m.tokens = static_cast<int64_t>(ids.size());
  double logprob = 0;
  for (size_t begin = 0; begin < ids.size(); begin += static_cast<size_t>(context)) {
    const size_t end = std::min(ids.size(), begin + static_cast<size_t>(context));
    if (end - begin < 2) break;  // a last window of one token scores nothing
    SPARK_ASSIGN_OR_RETURN(
        double sum, ScoreWindow(endpoint, {ids.begin() + begin, ids.begin() + end}, timeout));
    logprob += sum;
    m.scored_tokens += static_cast<int64_t>(end - begin) - 1;
  }
  m.mean_nll = -logprob / static_cast<double>(m.scored_tokens);
  m.perplexity = std::exp(m.mean_nll);
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

CheckResult QualityCheck(const Endpoint& endpoint, const std::optional<QualityReference>& reference,
                         const std::string& profile_file, std::chrono::milliseconds timeout) {
  CheckResult r{"quality", false};
  if (!reference) {
    r.verdict = Verdict::kNoReference;
    r.detail = (profile_file.empty() ? std::string("no profile given (-c or --profile)")
                                     : profile_file + " records no quality reference") +
               " (quality: {text, perplexity, tolerance}; docs/evaluation.md)";
    return r;
  }
  Result<std::string> text = ReadText(reference->text_file);
  if (!text.ok()) {
    r.detail = text.status().message();
    return r;
  }
  Result<PerplexityMeasure> m = MeasurePerplexity(endpoint, *text, reference->context, timeout);
  if (!m.ok()) {
    r.detail = m.status().message();
    return r;
  }
  r.latency_s = m->seconds;
  const double allowed = reference->tolerance * reference->perplexity;
  const bool ok = std::fabs(m->perplexity - reference->perplexity) <= allowed;
  r.verdict = ok ? Verdict::kPass : Verdict::kFail;
  r.detail = "perplexity " + FormatNumber(m->perplexity) + " (reference " +
             FormatNumber(reference->perplexity) + " +/- " +
             FormatNumber(100 * reference->tolerance) + "%) over " +
             std::to_string(m->scored_tokens) + " scored tokens of " + reference->text_file;
  return r;
}

}  // namespace spark::serving
