#include "sparkctl/serving/bench_serve.h"

#include <atomic>
#include <ctime>
#include <optional>
#include <mutex>
#include <random>
#include <thread>

#include "base/strings.h"
#include "sparkctl/serving/corpus.h"

namespace spark::serving {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The token ids of `text` on the server (/tokenize: spark-engine and vLLM have it), or nothing.
std::optional<std::vector<int>> Tokenize(const Endpoint& e, const std::string& text) {
  Result<JsonReply> r = PostJson(e, "/tokenize", {{"model", e.model}, {"prompt", text}},
                                 std::chrono::seconds(300));
  if (!r.ok() || r->status != 200 || !r->body.is_object() || !r->body.contains("tokens") ||
      !r->body["tokens"].is_array()) {
    return std::nullopt;
  }
  std::vector<int> ids;
  for (const json& t : r->body["tokens"]) {
    if (!t.is_number_integer()) return std::nullopt;
    ids.push_back(t.get<int>());
  }
  return ids;
}

// Characters per token of the corpus on this server's tokenizer: /tokenize, else a short
// completion's usage block, else 4.
double CharsPerToken(const Endpoint& e, bool* can_tokenize) {
  const std::string sample = CorpusText(0, 20000);
  if (std::optional<std::vector<int>> ids = Tokenize(e, sample); ids && !ids->empty()) {
    *can_tokenize = true;
    return static_cast<double>(sample.size()) / static_cast<double>(ids->size());
  }
  *can_tokenize = false;
  const std::string head = CorpusText(0, 4000);
  Result<JsonReply> c =
      PostJson(e, "/v1/completions", {{"model", e.model}, {"prompt", head}, {"max_tokens", 1}},
               std::chrono::seconds(120));
  if (c.ok() && c->status == 200 && c->body.is_object() && c->body.contains("usage")) {
    const int n = c->body["usage"].value("prompt_tokens", 0);
    if (n > 0) return static_cast<double>(head.size()) / n;
  }
  return 4.0;
}

// The prompt of one stream: nonce, then text, sized to `tokens`.
std::string Prompt(const std::string& nonce, int tokens, double chars_per_token, size_t offset,
                   bool shared_prefix) {
  const size_t chars = static_cast<size_t>(std::max(1.0, tokens * chars_per_token)) -
                       std::min<size_t>(nonce.size(), static_cast<size_t>(tokens * chars_per_token));
  const std::string text = CorpusText(offset, chars);
  return shared_prefix ? text + "\n" + nonce : nonce + "\n" + text;
}

StreamSample OneStream(const Endpoint& e, const json& prompt, const BenchServeOptions& o,
                       Clock::time_point round_start) {
  StreamSample s;
  const json body = {{"model", e.model},
                     {"prompt", prompt},
                     {"max_tokens", o.output_tokens},
                     {"min_tokens", o.output_tokens},
                     {"ignore_eos", true},
                     {"temperature", 0}};
  Result<StreamResult> r = Stream(e, "/v1/completions", body, o.timeout);
  if (!r.ok()) {
    s.error = r.status().message();
    return s;
  }
  if (r->status != 200 || !r->error.empty() || !r->saw_done || !r->usage) {
    s.error = r->status != 200 || !r->error.empty()
                  ? "HTTP " + std::to_string(r->status) + ": " + r->error
                  : !r->saw_done ? "the stream ended without [DONE]"
                                 : "no usage block (stream_options.include_usage)";
    return s;
  }
  s.ok = true;
  s.ttft_s = r->ttft_seconds();
  s.decode_s = r->decode_seconds();
  s.e2e_s = r->total_seconds();
  s.first_token_at = std::chrono::duration<double>(r->first_token - round_start).count();
  s.last_token_at = std::chrono::duration<double>(r->last_token - round_start).count();
  s.prompt_tokens = r->usage->prompt_tokens;
  s.completion_tokens = r->usage->completion_tokens;
  s.cached_tokens = r->usage->cached_tokens;
  s.token_events = r->token_events;
  if (s.completion_tokens != o.output_tokens) {
    s.ok = false;
    s.error = "the server generated " + std::to_string(s.completion_tokens) + " tokens, not " +
              std::to_string(o.output_tokens) + " (min_tokens/ignore_eos not honoured)";
  }
  return s;
}

}  // namespace

Result<std::vector<int>> ParseSizes(const std::string& list, const std::string& flag) {
  std::vector<int> out;
  for (const std::string& item : Split(list, ',', /*skip_empty=*/true)) {
    std::string s(Trim(item));
    int64_t scale = 1;
    if (!s.empty() && (s.back() == 'k' || s.back() == 'K')) {
      scale = 1024;
      s.pop_back();
    }
    const std::optional<int64_t> v = ParseInt(s);
    if (!v || *v < 1 || *v * scale > (int64_t{1} << 30)) {
      return InvalidArgumentError(flag + " " + list + ": \"" + item +
                                  "\" is not a positive count (e.g. 1,2,4 or 1k,32k)");
    }
    out.push_back(static_cast<int>(*v * scale));
  }
  if (out.empty()) return InvalidArgumentError(flag + ": give at least one value");
  return out;
}

Result<BenchServeRun> RunBenchServe(const Endpoint& e, BenchIdentity identity,
                                    const BenchServeOptions& o) {
  BenchServeRun run;
  run.identity = std::move(identity);
  run.options = o;
  run.started = UtcNow();
  if (Result<JsonReply> m = GetJson(e, "/v1/models"); m.ok() && m->body.is_object() &&
                                                          m->body.contains("data")) {
    for (const json& d : m->body["data"]) {
      if (d.value("id", "") == e.model && d.contains("max_model_len") &&
          d["max_model_len"].is_number_integer()) {
        run.max_model_len = d["max_model_len"];
      }
    }
  }
  // A first short request: the endpoint works and warms up (not measured).
  SPARK_ASSIGN_OR_RETURN(StreamResult warm,
                         Stream(e, "/v1/completions",
                                {{"model", e.model}, {"prompt", "Hello"}, {"max_tokens", 2}},
                                o.timeout));
  if (warm.status != 200 || !warm.error.empty()) {
    return UnavailableError(e.url.text + ": the warm-up request failed: HTTP " +
                            std::to_string(warm.status) + ": " + warm.error);
  }
  run.chars_per_token = CharsPerToken(e, &run.exact_prompts);
  std::mt19937_64 rng(std::random_device{}());
  char run_id[16];
  std::snprintf(run_id, sizeof run_id, "%06llx",
                static_cast<unsigned long long>(rng() & 0xffffff));
  for (int context : o.contexts) {
    for (int concurrency : o.concurrency) run.cells.push_back({context, concurrency, "", {}});
  }
  for (size_t ci = 0; ci < run.cells.size(); ++ci) {
    BenchCell& cell = run.cells[ci];
    if (run.max_model_len > 0 && cell.context + o.output_tokens > run.max_model_len) {
      cell.skipped = std::to_string(cell.context) + " + " + std::to_string(o.output_tokens) +
                     " tokens exceed the model's " + std::to_string(run.max_model_len);
      continue;
    }
    for (int round = 1; round <= o.repeats; ++round) {
      std::vector<StreamSample> samples(cell.concurrency);
      std::vector<json> prompts(cell.concurrency);
      const size_t shared_offset = rng() % Corpus().size();
      for (int s = 0; s < cell.concurrency; ++s) {
        const std::string nonce = "[bench " + std::string(run_id) + " cell " +
                                  std::to_string(ci) + " round " + std::to_string(round) +
                                  " stream " + std::to_string(s) + "]";
        // With /tokenize, a little more text than needed, cut to exactly `context` tokens and
        // sent as token ids; otherwise text sized by the characters per token.
        const std::string text =
            Prompt(nonce, run.exact_prompts ? cell.context * 5 / 4 + 16 : cell.context,
                   run.chars_per_token, o.shared_prefix ? shared_offset : rng() % Corpus().size(),
                   o.shared_prefix);
        std::optional<std::vector<int>> ids;
        if (run.exact_prompts) ids = Tokenize(e, text);
        if (ids && static_cast<int>(ids->size()) >= cell.context) {
          if (o.shared_prefix) {  // Keep the nonce at the end.
            ids->erase(ids->begin(), ids->end() - cell.context);
          } else {
            ids->resize(cell.context);
          }
          prompts[s] = *ids;
        } else {
          prompts[s] = Prompt(nonce, cell.context, run.chars_per_token,
                              o.shared_prefix ? shared_offset : rng() % Corpus().size(),
                              o.shared_prefix);
        }
      }
      std::atomic<int> done{0};
      std::mutex progress_mu;
      auto report = [&] {
        if (!o.on_progress) return;
        std::lock_guard lock(progress_mu);
        o.on_progress(ci, run.cells.size(), round, done, cell.concurrency,
                      std::to_string(cell.context) + " tokens x " +
                          std::to_string(cell.concurrency) + " streams");
      };
      report();
      std::vector<std::thread> threads;
      const Clock::time_point start = Clock::now();
      for (int s = 0; s < cell.concurrency; ++s) {
        threads.emplace_back([&, s] {
          samples[s] = OneStream(e, prompts[s], o, start);
          ++done;
          report();
        });
      }
      for (auto& t : threads) t.join();
      cell.rounds.push_back(std::move(samples));
    }
  }
  return run;
}

}  // namespace spark::serving
