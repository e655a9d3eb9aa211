// `spark-engine generate`: runs prompts through the runtime Engine (scheduler, prefix cache,
// sampler) on the CPU or CUDA backend — the smallest end-to-end use of the serving path, without
// HTTP.
//
// Ranks are processes. With --tp N and no --rank, this process is a launcher: it picks a free
// loopback port and starts N copies of itself (/proc/self/exe ... --rank r), supervises them
// (rank_launch.h) and reports the first rank that fails. With --rank R it is one rank of the
// group: rank 0 runs the Engine over a plan-broadcasting runner and prints the results, the
// other ranks run the plans they receive. Ranks on several machines are started by hand with
// --rank, --master-addr and --master-port.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "base/logging.h"
#include "base/strings.h"
#include "engine/cli/backend_flags.h"
#include "engine/cli/speculative_flags.h"
#include "engine/cli/engine_command.h"
#include "engine/cli/rank_launch.h"
#include "engine/runtime/engine.h"
#include "engine/tokenizer/tokenizer.h"

namespace spark::engine {
namespace {

struct GenerateOptions {
  std::string model_dir;
  std::string tokenizer_dir;  // Default: the model directory.
  std::string prompt_ids;     // "5,17,42" or several prompts: "5,17,42;8,9"
  std::string prompt;         // text, encoded with the checkpoint's tokenizer
  int max_tokens = 16;
  double temperature = 0.0;  // 0: greedy
  uint64_t seed = 0;
  bool print_ids = false;
  bool print_stats = false;
  bool ignore_eos = false;
  int repeat = 1;  // rounds of the same prompts, one after the other (prefix cache reuse)
  // Ranks and transport.
  int tp = 1;
  int rank = -1;              // -1: this process runs (or launches) every rank
  cli::BackendFlags compute;  // --backend, --weight-dtype, --cuda-graphs
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free loopback port (launcher) / 29500 (explicit --rank)
  int comm_timeout_s = 60;
  int threads = 0;
  // KV cache and scheduling.
  int block_size = 16;
  int num_kv_blocks = 0;  // 0: enough for every prompt at once
  int max_batched_tokens = 2048;
  bool no_prefix_caching = false;
  runtime::SpeculativeOptions speculative;  // --speculative-method ... (rank 0 drafts)
  int test_exit_rank = -1;         // hidden: that worker rank exits with status 3 after one plan
  std::string log_level = "warn";  // the global --log-level, handed to local ranks
};

Result<std::vector<std::vector<int32_t>>> ParsePrompts(const std::string& text) {
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& one : Split(text, ';', /*skip_empty=*/true)) {
    std::vector<int32_t> ids;
    for (const std::string& part : Split(one, ',', /*skip_empty=*/true)) {
      std::optional<int64_t> id = ParseInt(Trim(part));
      if (!id || *id < 0 || *id > INT32_MAX) {
        return InvalidArgumentError("--prompt-ids: '" + part +
                                    "' is not a token id (want e.g. 5,17,42 or 5,17;42)");
      }
      ids.push_back(static_cast<int32_t>(*id));
    }
    if (!ids.empty()) prompts.push_back(std::move(ids));
  }
  if (prompts.empty()) return InvalidArgumentError("--prompt-ids: no token ids given");
  return prompts;
}

// The argv of local rank `rank` started by the launcher: this command's options, made explicit.
std::vector<std::string> RankArgv(const GenerateOptions& o, int rank, int port, int threads) {
  std::vector<std::string> a = {"/proc/self/exe", "--log-level",
                                o.log_level,      "generate",
                                "--model",        o.model_dir,
                                "--tp",           std::to_string(o.tp),
                                "--rank",         std::to_string(rank),
                                "--master-addr",  "127.0.0.1",
                                "--master-port",  std::to_string(port),
                                "--comm-timeout", std::to_string(o.comm_timeout_s),
                                "--threads",      std::to_string(threads),
                                "--block-size",   std::to_string(o.block_size)};
  const std::vector<std::string> compute = cli::BackendArgv(o.compute);
  a.insert(a.end(), compute.begin(), compute.end());
  if (!o.tokenizer_dir.empty()) a.insert(a.end(), {"--tokenizer", o.tokenizer_dir});
  if (o.test_exit_rank >= 0) {
    a.insert(a.end(), {"--test-exit-rank", std::to_string(o.test_exit_rank)});
  }
  // Every rank holds its shard of a draft model (dspark); only rank 0 drafts otherwise.
  const std::vector<std::string> spec = cli::SpeculativeArgv(o.speculative);
  if (rank != 0) {  // Workers get the KV shape from rank 0 and need no prompt.
    if (o.speculative.needs_draft_model()) a.insert(a.end(), spec.begin(), spec.end());
    return a;
  }
  if (!o.prompt.empty()) a.insert(a.end(), {"--prompt", o.prompt});
  if (!o.prompt_ids.empty()) a.insert(a.end(), {"--prompt-ids", o.prompt_ids});
  a.insert(a.end(), {"--max-tokens", std::to_string(o.max_tokens), "--temperature",
                     std::to_string(o.temperature), "--seed", std::to_string(o.seed), "--repeat",
                     std::to_string(o.repeat), "--num-kv-blocks", std::to_string(o.num_kv_blocks),
                     "--max-batched-tokens", std::to_string(o.max_batched_tokens)});
  if (o.print_ids) a.push_back("--print-ids");
  if (o.print_stats) a.push_back("--print-stats");
  if (o.ignore_eos) a.push_back("--ignore-eos");
  if (o.no_prefix_caching) a.push_back("--no-prefix-caching");
  a.insert(a.end(), spec.begin(), spec.end());
  return a;
}

Status LaunchLocalRanks(const GenerateOptions& o) {
  int port = o.master_port;
  if (port == 0) {
    SPARK_ASSIGN_OR_RETURN(port, cli::PickFreeLoopbackPort());
  }
  const int total =
      o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
  const int per_rank = std::max(1, total / o.tp);  // the local ranks share the cores
  std::vector<std::vector<std::string>> argvs;
  for (int r = 0; r < o.tp; ++r) argvs.push_back(RankArgv(o, r, port, per_rank));
  Logger("engine.generate")->info("starting {} ranks, rendezvous on 127.0.0.1:{}", o.tp, port);
  return cli::SpawnLocalRanks(argvs);
}

cli::RankOptions MakeRankOptions(const GenerateOptions& o, int rank, int64_t num_blocks) {
  cli::RankOptions r;
  r.model_dir = o.model_dir;
  r.tokenizer_dir = o.tokenizer_dir;
  cli::ApplyBackendFlags(o.compute, &r);
  r.tp = o.tp;
  r.rank = rank;
  r.master_addr = o.master_addr;
  r.master_port = o.master_port > 0 ? o.master_port : 29500;
  r.comm_timeout = std::chrono::seconds(o.comm_timeout_s);
  // One rank per process: --threads is this rank's (default: every core).
  r.threads = o.threads;
  if (r.threads <= 0) r.threads = static_cast<int>(std::thread::hardware_concurrency());
  r.num_kv_blocks = num_blocks;
  r.block_size = o.block_size;
  r.max_batched_tokens = o.max_batched_tokens;
  r.speculative_tokens = o.speculative.enabled() ? o.speculative.num_speculative_tokens : 0;
  r.load_draft = o.speculative.needs_draft_model();
  r.test_exit_rank = o.test_exit_rank;
  return r;
}

struct PromptSet {
  std::vector<std::vector<int32_t>> prompts;
  std::optional<tokenizer::Tokenizer> tok;  // set when text is read or written
};

Result<PromptSet> ReadPrompts(const GenerateOptions& o) {
  if (o.prompt_ids.empty() == o.prompt.empty()) {
    return InvalidArgumentError("give exactly one of --prompt-ids and --prompt");
  }
  PromptSet set;
  if (!o.prompt.empty() || !o.print_ids) {
    Result<tokenizer::Tokenizer> loaded =
        tokenizer::Tokenizer::FromDir(o.tokenizer_dir.empty() ? o.model_dir : o.tokenizer_dir);
    if (!loaded.ok()) {
      return loaded.status().WithContext(
          "--prompt and text output need the checkpoint's tokenizer.json (use --prompt-ids and "
          "--print-ids for a checkpoint without one)");
    }
    set.tok.emplace(std::move(*loaded));
  }
  if (!o.prompt.empty()) {
    set.prompts.push_back(set.tok->Encode(o.prompt, /*add_special=*/true));
    if (set.prompts.back().empty()) return InvalidArgumentError("--prompt encodes to no tokens");
  } else {
    SPARK_ASSIGN_OR_RETURN(set.prompts, ParsePrompts(o.prompt_ids));
  }
  return set;
}

runtime::EngineOptions MakeEngineOptions(const GenerateOptions& o, const PromptSet& set,
                                         const core::ModelConfig& config, int64_t num_blocks) {
  size_t longest = 0;
  for (const auto& p : set.prompts) longest = std::max(longest, p.size());
  runtime::EngineOptions eo;
  eo.argmax_plans = true;  // ModelStepRunner answers them: greedy steps move ids, not logits
  eo.scheduler.max_model_len = static_cast<int>(longest) + o.max_tokens;
  eo.scheduler.max_num_batched_tokens = o.max_batched_tokens;
  eo.scheduler.max_num_seqs = std::max<int>(1, static_cast<int>(set.prompts.size()));
  eo.blocks.num_blocks = static_cast<int>(num_blocks);
  eo.blocks.block_size = o.block_size;
  eo.blocks.enable_prefix_caching = !o.no_prefix_caching;
  eo.eos_token_id = config.eos_token_ids.empty() ? -1 : config.eos_token_ids[0];
  eo.seed = o.seed;
  eo.speculative = o.speculative;
  return eo;
}

// Runs every round of prompts to completion; returns each request's tokens, in request order.
Result<std::vector<std::vector<int32_t>>> RunRounds(const GenerateOptions& o, const PromptSet& set,
                                                    const core::ModelConfig& config,
                                                    runtime::Engine& engine) {
  runtime::SamplingParams params;
  params.temperature = static_cast<float>(o.temperature);
  params.seed = o.seed;
  params.max_tokens = o.max_tokens;
  params.ignore_eos = o.ignore_eos;
  if (!o.ignore_eos && config.eos_token_ids.size() > 1) {
    params.stop_token_ids.assign(config.eos_token_ids.begin() + 1, config.eos_token_ids.end());
  }
  std::map<uint64_t, std::vector<int32_t>> out;
  uint64_t next_id = 0;
  for (int round = 0; round < o.repeat; ++round) {
    for (const auto& prompt : set.prompts) {
      out[next_id];
      SPARK_RETURN_IF_ERROR(engine.AddRequest(next_id++, prompt, params));
    }
    while (engine.HasUnfinished()) {
      SPARK_ASSIGN_OR_RETURN(std::vector<runtime::TokenOutput> step, engine.Step());
      for (const runtime::TokenOutput& t : step) {
        if (t.has_token) out[t.seq_id].push_back(t.token);
      }
    }
  }
  std::vector<std::vector<int32_t>> results;
  for (auto& [id, tokens] : out) results.push_back(std::move(tokens));
  return results;
}

Status RunRankZero(const GenerateOptions& o) {
  SPARK_ASSIGN_OR_RETURN(PromptSet set, ReadPrompts(o));
  int64_t blocks = o.num_kv_blocks;
  if (blocks <= 0) {  // every prompt of a round at full length, plus one spare block
    blocks = 1;
    for (const auto& p : set.prompts) {
      blocks += (static_cast<int64_t>(p.size()) + o.max_tokens + o.block_size - 1) / o.block_size;
    }
  }
  cli::RankOptions ro = MakeRankOptions(o, 0, blocks);
  // The memory plan counts the step at this run's sizes (broadcast to the other ranks).
  int64_t longest = 1;
  for (const auto& p : set.prompts) longest = std::max<int64_t>(longest, p.size());
  ro.max_model_len = longest + o.max_tokens;
  ro.max_num_seqs = std::max<int>(1, static_cast<int>(set.prompts.size()));
  SPARK_ASSIGN_OR_RETURN(auto rank, cli::StartRank(ro));
  const core::ModelConfig& config = rank->config();
  SPARK_ASSIGN_OR_RETURN(
      auto engine,
      runtime::Engine::Create(MakeEngineOptions(o, set, config, blocks), rank->runner()));
  const auto start = std::chrono::steady_clock::now();
  SPARK_ASSIGN_OR_RETURN(auto results, RunRounds(o, set, config, *engine));
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  SPARK_RETURN_IF_ERROR(rank->Shutdown());
  const runtime::EngineStats stats = engine->stats();
  Logger("engine.generate")
      ->info("{} requests, {} steps in {:.3f} s", results.size(), stats.num_steps, secs);
  for (const auto& ids : results) {
    if (o.print_ids) {
      std::printf("%s\n", nlohmann::json(ids).dump().c_str());
    } else {
      std::printf("%s\n", set.tok->Decode(ids).c_str());
    }
  }
  if (o.print_stats) {
    nlohmann::json j = {{"num_steps", stats.num_steps},
                        {"prefix_queries", stats.prefix_queries},
                        {"prefix_hits", stats.prefix_hits},
                        {"prompt_tokens_computed", stats.prompt_tokens_computed},
                        {"num_preemptions", stats.num_preemptions},
                        {"spec_decode_num_drafts", stats.spec_drafts},
                        {"spec_decode_num_draft_tokens", stats.spec_draft_tokens},
                        {"spec_decode_num_accepted_tokens", stats.spec_accepted_tokens},
                        {"spec_decode_num_accepted_tokens_per_pos", stats.spec_accepted_per_pos},
                        {"spec_decode_mean_accepted_length",
                         stats.spec_drafts == 0
                             ? 0.0
                             : 1.0 + static_cast<double>(stats.spec_accepted_tokens) /
                                         static_cast<double>(stats.spec_drafts)},
                        {"seconds", secs}};
    std::printf("%s\n", j.dump().c_str());
  }
  std::fflush(stdout);
  return Status::Ok();
}

Status RunGenerate(const GenerateOptions& o) {
  if (o.tp < 1) return InvalidArgumentError("--tp must be >= 1");
  if (o.max_tokens < 1) return InvalidArgumentError("--max-tokens must be >= 1");
  if (o.repeat < 1) return InvalidArgumentError("--repeat must be >= 1");
  if (o.block_size < 1) return InvalidArgumentError("--block-size must be >= 1");
  SPARK_RETURN_IF_ERROR(cli::ValidateSpeculativeFlags(o.speculative, o.model_dir));
  // The rank options' checks (--backend, --rank, --master-port), before any rank is started;
  // the KV cache size is settled later (1 stands in for it here).
  SPARK_RETURN_IF_ERROR(MakeRankOptions(o, std::max(o.rank, 0), 1).Validate());
  if (o.tp > 1 && o.rank < 0) return LaunchLocalRanks(o);
  const int rank = std::max(o.rank, 0);
  if (o.tp > 1) {  // Every log line of a rank process names its rank.
    SPARK_RETURN_IF_ERROR(InitLogging({.level = o.log_level, .rank = rank}));
  }
  if (rank == 0) return RunRankZero(o);
  SPARK_ASSIGN_OR_RETURN(auto session, cli::StartRank(MakeRankOptions(o, rank, 0)));
  return session->RunWorker();
}

}  // namespace

void RegisterGenerateCommand(CLI::App& parent, CommandContext& context) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* cmd = parent.add_subcommand(
      "generate", "Generate tokens for prompts through the engine (scheduler, KV cache, TP ranks)");
  cmd->add_option("--model", o->model_dir, "Hugging Face checkpoint directory")->required();
  cmd->add_option("--tokenizer", o->tokenizer_dir, "Tokenizer directory (default: --model)");
  cmd->add_option("--prompt-ids", o->prompt_ids,
                  "Prompt(s) as comma-separated token ids; ';' separates prompts");
  cmd->add_option("--prompt", o->prompt, "Prompt text (needs the checkpoint's tokenizer.json)");
  cmd->add_option("--max-tokens", o->max_tokens, "Tokens to generate at most (default 16)");
  cmd->add_option("--temperature", o->temperature, "0 = greedy (default); > 0 samples");
  cmd->add_option("--seed", o->seed, "Sampling seed (default 0)");
  cmd->add_flag("--print-ids", o->print_ids, "Print each request's ids as a JSON array");
  cmd->add_flag("--print-stats", o->print_stats, "Print engine counters as a JSON line at the end");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Keep generating after an EOS token");
  cmd->add_option("--repeat", o->repeat, "Run the prompts this many rounds in turn (default 1)");
  cmd->add_option("--tp", o->tp, "Tensor-parallel ranks, one process each (default 1)");
  cmd->add_option("--rank", o->rank,
                  "Run only this rank (default: start all --tp ranks on this machine)");
  cli::AddBackendFlags(cmd, &o->compute);
  cmd->add_option("--master-addr", o->master_addr, "Rank 0's address (default 127.0.0.1)");
  cmd->add_option("--master-port", o->master_port,
                  "Rendezvous port (default: a free one when launching, 29500 with --rank)");
  cmd->add_option("--comm-timeout", o->comm_timeout_s,
                  "Seconds to wait for a peer rank (default 60)");
  cmd->add_option("--threads", o->threads,
                  "CPU threads: in all for local ranks, per rank with --rank (default: all)");
  cmd->add_option("--block-size", o->block_size, "KV cache block size in tokens (default 16)");
  cmd->add_option("--num-kv-blocks", o->num_kv_blocks,
                  "KV cache blocks (default: every prompt at full length)");
  cmd->add_option("--max-batched-tokens", o->max_batched_tokens,
                  "Tokens per step; longer prompts are prefilled in chunks (default 2048)");
  cmd->add_flag("--no-prefix-caching", o->no_prefix_caching, "Do not reuse cached KV blocks");
  cli::AddSpeculativeFlags(cmd, &o->speculative);
  cmd->add_option("--test-exit-rank", o->test_exit_rank)->group("");  // tests only
  cmd->footer(
      "\nExample:\n  spark-engine generate --model tests/fixtures/models/qwen3-tiny "
      "--prompt-ids 5,17,42 --max-tokens 8 --temperature 0 --print-ids --tp 2");
  cmd->callback([o, &context] {
    if (!context.log_level.empty()) o->log_level = context.log_level;
    Status s = RunGenerate(*o);
    context.exit_code = s.ok() ? kExitOk : ReportEngineError(s);
  });
}

}  // namespace spark::engine
