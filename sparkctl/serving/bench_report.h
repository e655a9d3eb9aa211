// What `sparkctl bench serve` reports from its samples (bench_serve.h): per cell the TTFT and
// end-to-end latency percentiles over every stream, and per-round means of prefill tok/s, decode
// tok/s per stream and aggregate decode tok/s, each with a 95% confidence interval over rounds
// (Student's t). Also the table, the versioned JSON document, the refusal to compare runs of
// different deployments, and an SVG plot of the matrix.
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sparkctl/serving/bench_serve.h"

namespace spark::serving {

struct Estimate {
  double mean = 0;
  double ci95 = 0;  // half-width; 0 with one round
  int n = 0;
};

struct CellSummary {
  int context = 0;
  int concurrency = 0;
  std::string skipped;
  int streams = 0;  // samples that succeeded
  int errors = 0;
  std::string first_error;
  double ttft_p50 = 0, ttft_p95 = 0;  // seconds, over all streams of all rounds
  double e2e_p50 = 0, e2e_p95 = 0;
  Estimate prefill_tps;    // per stream: prompt tokens / TTFT
  Estimate decode_tps;     // per stream: (completion tokens - 1) / decode time
  Estimate aggregate_tps;  // per round: sum of (completion - 1) / decode window of the round
  double mean_prompt_tokens = 0;
  double cached_fraction = 0;  // prompt tokens served from the prefix cache
  // Streams whose tokens came in fewer events than tokens: their decode rate is overstated.
  int clumped_streams = 0;
};

// The p-th percentile (0..100) by linear interpolation; 0 for no values.
double Percentile(std::vector<double> values, double p);
// Mean and 95% CI half-width (t distribution with n-1 degrees of freedom).
Estimate MeanCi95(const std::vector<double>& values);

std::vector<CellSummary> Summarize(const BenchServeRun& run);

// The --json document (schema sparkctl-bench-serve/v1): identity, options, cells with their
// summaries and raw samples.
nlohmann::ordered_json BenchJson(const BenchServeRun& run);
// The identity and summaries read back from a --json document (for --compare).
struct SavedRun {
  BenchIdentity identity;
  std::vector<CellSummary> cells;
};
// InvalidArgument naming `file` for a document of another schema.
Result<SavedRun> ParseBenchJson(const nlohmann::json& doc, const std::string& file);

// FailedPrecondition naming each of cluster, profile and build that differs (with both values);
// Ok when the runs may be compared.
Status CheckComparable(const BenchIdentity& a, const BenchIdentity& b);

std::string BenchTable(const BenchServeRun& run, const std::vector<CellSummary>& cells);
// This run against `before`, cell by cell (decode and TTFT changes in percent).
std::string CompareTable(const std::vector<CellSummary>& now, const SavedRun& before);
// Two panels over concurrency, one line per context: aggregate decode tok/s and TTFT p50.
std::string BenchSvg(const BenchServeRun& run, const std::vector<CellSummary>& cells);

}  // namespace spark::serving
