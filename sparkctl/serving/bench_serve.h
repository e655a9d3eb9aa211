// `sparkctl bench serve`: a serving benchmark with a written protocol (docs/bench.md). For each
// cell of the matrix (prompt length x concurrent streams), `repeats` rounds of `concurrency`
// streamed /v1/completions requests run at once, each with its own prompt: a nonce first (so no
// stream reuses another's prefix-cache blocks unless --shared-prefix asks for it), then real
// text (corpus.h) cut to the cell's length (exactly, in token ids, where the server has
// /tokenize), and an exact output length (min_tokens = max_tokens, ignore_eos). Token counts come from the server's usage block; times from the client's clock
// as events arrive. Statistics, the table, the JSON document, comparison and the SVG plot are in
// bench_report.h.
// Thread-safety: RunBenchServe starts one thread per stream of a round.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "sparkctl/serving/openai_api.h"

namespace spark::serving {

inline constexpr char kBenchServeSchema[] = "sparkctl-bench-serve/v1";

struct BenchServeOptions {
  std::vector<int> concurrency = {1, 2, 4, 8};
  std::vector<int> contexts = {1024, 32768, 131072};  // prompt tokens
  int output_tokens = 128;   // per stream, exact
  int repeats = 3;           // rounds per cell (the confidence intervals are over rounds)
  bool shared_prefix = false;  // every stream of a cell sends the same text (nonce at the end)
  std::chrono::milliseconds timeout{std::chrono::seconds(1800)};  // per request
  // Progress: cell index (from 0) of cells, round (from 1), streams finished of the round.
  std::function<void(size_t cell, size_t cells, int round, int done, int streams,
                     const std::string& what)>
      on_progress;
};

// What was measured, so that runs of different deployments are never compared.
struct BenchIdentity {
  std::string endpoint;
  std::string model;
  std::string cluster;         // cluster name ("" with --url)
  std::string cluster_sha256;  // of the cluster file ("" with --url)
  std::string profile;         // profile file ("" when unknown)
  std::string profile_sha256;  // of the profile file ("" when unknown)
  std::string build;           // GET /version "build" ("unknown" when the server has none)
  std::string server_version;  // GET /version "version"
  std::string corpus_sha256;
};

struct StreamSample {
  bool ok = false;
  std::string error;
  double ttft_s = 0;        // request sent -> first token
  double decode_s = 0;      // first token -> last token
  double e2e_s = 0;         // request sent -> [DONE]
  double first_token_at = 0;  // seconds since the round started (aggregate windows)
  double last_token_at = 0;
  int prompt_tokens = 0;      // usage
  int completion_tokens = 0;  // usage
  int cached_tokens = 0;      // usage.prompt_tokens_details.cached_tokens
  // Stream events that carried text. Fewer than completion_tokens: the server sent some tokens
  // together (it holds text until it is whole UTF-8), so decode_s starts late and the rate is
  // an overestimate.
  int token_events = 0;
};

struct BenchCell {
  int context = 0;
  int concurrency = 0;
  std::string skipped;  // Why the cell did not run ("" when it ran).
  std::vector<std::vector<StreamSample>> rounds;
};

struct BenchServeRun {
  BenchIdentity identity;
  BenchServeOptions options;
  std::string started;  // UTC, ISO 8601
  double chars_per_token = 0;  // how prompt text was sized
  // The server tokenizes (/tokenize): prompts were cut to exactly the cell's length in tokens
  // and sent as token ids. Otherwise text sized by chars_per_token.
  bool exact_prompts = false;
  int max_model_len = 0;       // from /v1/models (0: not given)
  std::vector<BenchCell> cells;
};

// Runs the matrix. Unavailable when the endpoint does not answer a first short request; a
// request that fails inside a cell is recorded in its sample, not returned.
Result<BenchServeRun> RunBenchServe(const Endpoint& endpoint, BenchIdentity identity,
                                    const BenchServeOptions& options);

// "1k" -> 1024, "32k" -> 32768, "512" -> 512; InvalidArgument otherwise.
Result<std::vector<int>> ParseSizes(const std::string& list, const std::string& flag);

}  // namespace spark::serving
