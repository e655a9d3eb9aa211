// `spark-engine perplexity`: the model's perplexity on a text file, through the runtime Engine's
// prompt scoring (SamplingParams::prompt_logprobs, max_tokens 0) — a quality number in the
// spirit of llama.cpp's perplexity tool. A broken kernel, a wrong quantization or a wrong
// tokenizer shows up as a perplexity far from the reference.
//
// The text is tokenized without special tokens and cut into consecutive windows of --context
// tokens (the last one shorter); every token but each window's first is scored given the tokens
// before it in its window. Mean NLL = -sum(log p) / scored tokens; perplexity = exp(mean NLL).
// `sparkctl check --quality` and scripts/quality_reference.py use the same windows.
// One process, one rank (--tp is not offered).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "engine/cli/backend_flags.h"
#include "engine/cli/engine_command.h"
#include "engine/cli/rank_launch.h"
#include "engine/runtime/engine.h"
#include "engine/tokenizer/tokenizer.h"

namespace spark::engine {
namespace {

struct PerplexityOptions {
  std::string model_dir;
  std::string tokenizer_dir;  // Default: the model directory.
  std::string text_file;
  int context = 512;          // tokens per window
  int max_batched_tokens = 2048;
  int threads = 0;
  bool json = false;
  cli::BackendFlags compute;
};

struct PerplexityResult {
  int64_t tokens = 0;         // of the whole text
  int64_t scored_tokens = 0;  // tokens minus one per window
  int windows = 0;
  double nll_sum = 0;
  double seconds = 0;
  double mean_nll() const { return scored_tokens > 0 ? nll_sum / scored_tokens : 0; }
};

Result<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("--text " + path + ": cannot be read");
  std::stringstream s;
  s << in.rdbuf();
  if (s.str().empty()) return InvalidArgumentError("--text " + path + ": the file is empty");
  return s.str();
}

// Scores every window (all submitted at once; the scheduler batches them).
Status ScoreWindows(const std::vector<int32_t>& ids, int context, runtime::Engine& engine,
                    PerplexityResult* r) {
  runtime::SamplingParams params;
  params.temperature = 0.0f;
  params.prompt_logprobs = 0;
  params.max_tokens = 0;
  uint64_t id = 0;
  for (size_t begin = 0; begin < ids.size(); begin += static_cast<size_t>(context)) {
    const size_t end = std::min(ids.size(), begin + static_cast<size_t>(context));
    SPARK_RETURN_IF_ERROR(engine.AddRequest(
        id++, std::vector<int32_t>(ids.begin() + begin, ids.begin() + end), params));
    r->scored_tokens += static_cast<int64_t>(end - begin) - 1;
  }
  r->windows = static_cast<int>(id);
  int64_t seen = 0;
  while (engine.HasUnfinished()) {
    SPARK_ASSIGN_OR_RETURN(std::vector<runtime::TokenOutput> step, engine.Step());
    for (const runtime::TokenOutput& t : step) {
      for (const runtime::SampleResult& s : t.prompt_logprobs) {
        r->nll_sum -= s.logprob;
        ++seen;
      }
    }
  }
  if (seen != r->scored_tokens) {
    return InternalError("perplexity: " + std::to_string(seen) + " scores for " +
                         std::to_string(r->scored_tokens) + " scored tokens");
  }
  return Status::Ok();
}

void Print(const PerplexityOptions& o, const PerplexityResult& r) {
  const double ppl = std::exp(r.mean_nll());
  const double rate = r.seconds > 0 ? static_cast<double>(r.tokens) / r.seconds : 0;
  if (o.json) {
    nlohmann::ordered_json j = {{"schema", "spark-engine-perplexity/v1"},
                        {"model", o.model_dir},
                        {"text", o.text_file},
                        {"context", o.context},
                        {"tokens", r.tokens},
                        {"scored_tokens", r.scored_tokens},
                        {"windows", r.windows},
                        {"mean_nll", r.mean_nll()},
                        {"perplexity", ppl},
                        {"seconds", r.seconds},
                        {"tokens_per_second", rate}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%-10s %-8s %-8s %-10s %-12s %-10s %s\n", "tokens", "scored", "windows",
                "mean NLL", "perplexity", "tok/s", "seconds");
    std::printf("%-10lld %-8lld %-8d %-10.4f %-12.4f %-10.1f %.2f\n",
                static_cast<long long>(r.tokens), static_cast<long long>(r.scored_tokens),
                r.windows, r.mean_nll(), ppl, rate, r.seconds);
  }
  std::fflush(stdout);
}

Status RunPerplexity(const PerplexityOptions& o) {
  if (o.context < 2) return InvalidArgumentError("--context must be >= 2 (one token scored)");
  SPARK_ASSIGN_OR_RETURN(const std::string text, ReadText(o.text_file));
  Result<tokenizer::Tokenizer> tok =
      tokenizer::Tokenizer::FromDir(o.tokenizer_dir.empty() ? o.model_dir : o.tokenizer_dir);
  if (!tok.ok()) return tok.status().WithContext("perplexity needs the checkpoint's tokenizer");
  const std::vector<int32_t> ids = tok->Encode(text, /*add_special=*/false);
  if (ids.size() < 2) return InvalidArgumentError("--text " + o.text_file + ": under 2 tokens");
  const int block_size = 16;
  const int64_t windows = (static_cast<int64_t>(ids.size()) + o.context - 1) / o.context;
  const int64_t blocks = windows * ((o.context + block_size) / block_size) + 1;
  cli::RankOptions ro;
  ro.model_dir = o.model_dir;
  ro.tokenizer_dir = o.tokenizer_dir;
  cli::ApplyBackendFlags(o.compute, &ro);
  ro.threads = o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
  ro.num_kv_blocks = blocks;
  ro.block_size = block_size;
  ro.max_batched_tokens = o.max_batched_tokens;
  ro.max_model_len = o.context + 1;
  ro.max_num_seqs = static_cast<int>(std::min<int64_t>(windows, 64));
  SPARK_RETURN_IF_ERROR(ro.Validate());
  SPARK_ASSIGN_OR_RETURN(auto rank, cli::StartRank(ro));
  runtime::EngineOptions eo;
  eo.scheduler.max_model_len = o.context + 1;
  eo.scheduler.max_num_batched_tokens = o.max_batched_tokens;
  eo.scheduler.max_num_seqs = ro.max_num_seqs;
  eo.blocks.num_blocks = static_cast<int>(blocks);
  eo.blocks.block_size = block_size;
  SPARK_ASSIGN_OR_RETURN(auto engine, runtime::Engine::Create(eo, rank->runner()));
  PerplexityResult r;
  r.tokens = static_cast<int64_t>(ids.size());
  const auto start = std::chrono::steady_clock::now();
  SPARK_RETURN_IF_ERROR(ScoreWindows(ids, o.context, *engine, &r));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  SPARK_RETURN_IF_ERROR(rank->Shutdown());
  Print(o, r);
  return Status::Ok();
}

}  // namespace

void RegisterPerplexityCommand(CLI::App& parent, CommandContext& context) {
  auto o = std::make_shared<PerplexityOptions>();
  CLI::App* cmd = parent.add_subcommand(
      "perplexity", "Measure the model's perplexity on a text file (prompt scoring, one rank)");
  cmd->add_option("--model", o->model_dir, "Hugging Face checkpoint directory")->required();
  cmd->add_option("--tokenizer", o->tokenizer_dir, "Tokenizer directory (default: --model)");
  cmd->add_option("--text", o->text_file, "UTF-8 text file to score")->required();
  cmd->add_option("--context", o->context,
                  "Tokens per window; each window's first token is not scored (default 512)");
  cmd->add_option("--max-batched-tokens", o->max_batched_tokens, "Tokens per step (default 2048)");
  cmd->add_option("--threads", o->threads, "CPU threads (default: all)");
  cmd->add_flag("--json", o->json, "Print a JSON object (schema spark-engine-perplexity/v1)");
  cli::AddBackendFlags(cmd, &o->compute);
  cmd->footer(
      "\nExample:\n  spark-engine perplexity --model /models/qwen3-tiny-demo --text "
      "profiles/quality/demo.txt --json");
  cmd->callback([o, &context] {
    Status s = RunPerplexity(*o);
    context.exit_code = s.ok() ? kExitOk : ReportEngineError(s);
  });
}

}  // namespace spark::engine
