// The acceptance suite of `sparkctl check`: what users try first on a new deployment, each check
// with a verdict, its latency and its decode rate.
//   protocol checks (always judged): models listed, strict JSON Schema output, a forced tool call
//     with valid arguments and its second turn, streaming with a usage block, a long prompt,
//     concurrent requests;
//   content checks (judged unless the weights are random): arithmetic, a code task, thinking on
//     and off, the model choosing the tool by itself, answers that use the tool result.
// On random weights a content check runs (the request must still succeed) but its verdict is
// "not judged (random weights)".
// Thread-safety: RunAcceptance is reentrant; it starts threads for the concurrent check.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sparkctl/serving/openai_api.h"

namespace spark::serving {

inline constexpr char kCheckSchema[] = "sparkctl-check/v1";

// kNoReference: the quality check of a profile that records no reference (not judged).
enum class Verdict { kPass, kFail, kNotJudged, kNoReference };
// "pass", "fail", "not judged (random weights)", "no reference"
const char* VerdictName(Verdict v);

struct CheckResult {
  std::string name;
  bool content = false;  // A content check (judged only on trained weights).
  Verdict verdict = Verdict::kFail;
  std::string detail;        // What was seen (and, on failure, what was expected).
  double latency_s = 0;      // Request sent -> reply complete (the slowest, for concurrent).
  double tokens_per_s = 0;   // Generated tokens / decode time; 0 when not measured.
};

struct AcceptanceOptions {
  bool random_weights = false;  // Content checks report "not judged (random weights)".
  int concurrency = 8;          // Requests of the concurrent check.
  int long_prompt_tokens = 0;   // 0: min(8000, max_model_len / 2).
  std::chrono::milliseconds timeout{std::chrono::seconds(600)};  // per request
  std::function<void(const CheckResult&)> on_result;  // Progress: each check as it ends.
};

// Runs every check against `endpoint` (whose model is set). Never fails as a whole: a check that
// cannot run is a failed check with the reason.
std::vector<CheckResult> RunAcceptance(const Endpoint& endpoint, const AcceptanceOptions& options);

// `s` cut to at most `n` bytes (then "..."), never inside a UTF-8 sequence, on one line.
std::string ClipText(const std::string& s, size_t n = 80);

// The --json document: {"schema", "endpoint", "model", "random_weights", "passed", "checks"}.
nlohmann::ordered_json AcceptanceJson(const Endpoint& endpoint, const AcceptanceOptions& options,
                                      const std::vector<CheckResult>& results);

// The table printed without --json.
std::string AcceptanceTable(const std::vector<CheckResult>& results);

// True when no check failed.
bool AllPassed(const std::vector<CheckResult>& results);

}  // namespace spark::serving
