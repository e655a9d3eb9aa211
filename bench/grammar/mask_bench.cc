// grammar_mask_bench: what structured output costs per token. For a vocabulary (a real tokenizer
// padded to the model's logit rows: Qwen3 151,936, DeepSeek 129,280) and a JSON Schema, B
// sequences each write documents that follow the schema, tokenized by the real tokenizer (as a
// model would write them); every step fills the B masks on the engine's mask pool
// (runtime::ConstraintMasks, T threads) and accepts one token per sequence. Prints a table and writes JSON: compile time, mask time per step and per token, accept
// time per token. Run from the repository root (bench/grammar/NOTES.md).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/grammar/grammar_compiler.h"
#include "engine/runtime/constraint_masks.h"
#include "engine/tokenizer/tokenizer.h"

namespace {

using namespace spark;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

// A schema of the kind tools and extraction ask for: nested object, enums, bounded strings,
// numbers, an array of objects.
constexpr char kSchema[] = R"({
  "type": "object",
  "properties": {
    "id": {"type": "integer", "minimum": 0, "maximum": 1000000},
    "name": {"type": "string", "maxLength": 24},
    "email": {"type": "string", "format": "email"},
    "status": {"enum": ["active", "suspended", "closed"]},
    "score": {"type": "number"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 4},
    "orders": {"type": "array", "maxItems": 3, "items": {"type": "object",
      "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                     "qty": {"type": "integer", "minimum": 1, "maximum": 99}},
      "required": ["sku", "qty"]}}
  },
  "required": ["id", "name", "email", "status", "score", "tags", "orders"]
})";

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Row {
  std::string tokenizer;
  int vocab = 0;
  int batch = 0;
  int threads = 0;
  int steps = 0;
  double compile_ms = 0;
  double mask_step_us = 0;      // one step, all B masks on the pool: median over steps
  double mask_step_p90_us = 0;  // ... 90th percentile
  double mask_token_us = 0;     // per sequence-token: median step x min(threads, B) / B
  double accept_token_us = 0;   // median over accepted tokens
};

Row Run(const std::string& dir, int vocab, int batch, int threads, int steps) {
  auto tok = tokenizer::Tokenizer::FromDir(dir);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    std::exit(2);
  }
  engine::grammar::GrammarVocabulary v;
  v.tokens.resize(std::min<int>(tok->vocab_size(), vocab));
  for (int32_t id = 0; id < static_cast<int32_t>(v.tokens.size()); ++id) {
    if (tok->IsValidId(id) && !tok->IsAdded(id)) v.tokens[id] = tok->TokenBytes(id);
  }
  v.vocab_size = vocab;
  if (tok->eos_id()) v.stop_ids.push_back(*tok->eos_id());
  auto compiler = engine::grammar::GrammarCompiler::Create(v, threads);
  if (!compiler.ok()) std::exit(2);
  engine::grammar::ConstraintRequest r;
  r.kind = engine::grammar::ConstraintRequest::Kind::kJsonSchema;
  r.param = "schema";
  r.schema = nlohmann::ordered_json::parse(kSchema);
  const auto compile_start = Clock::now();
  auto spec = (*compiler)->Compile(r);
  const double compile_ms = Since(compile_start) * 1e3;
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.status().ToString().c_str());
    std::exit(2);
  }
  // Documents a model would write under the schema, as the tokenizer splits them: each sequence
  // is fed one (teacher forcing), then the stop token, then the next. Every token must be
  // allowed by the mask filled before it (the bench fails otherwise).
  auto document = [&](int i) {
    static const char* kStatus[] = {"active", "suspended", "closed"};
    nlohmann::ordered_json d = {
        {"id", 1000 + 37 * i},
        {"name", "Customer " + std::to_string(i)},
        {"email", "user" + std::to_string(i) + "@example.com"},
        {"status", kStatus[i % 3]},
        {"score", 12.5 + i},
        {"tags", nlohmann::ordered_json::array({"alpha", "beta"})},
        {"orders", nlohmann::ordered_json::array(
                       {{{"sku", "ABC-" + std::to_string(1000 + i % 9000)}, {"qty", 1 + i % 9}}})}};
    std::vector<int32_t> ids = tok->Encode(d.dump(i % 2 == 0 ? -1 : 2), false);
    ids.push_back(v.stop_ids.at(0));
    return ids;
  };
  const engine::runtime::ConstraintGate gate;
  struct Seq {
    std::unique_ptr<engine::runtime::ConstrainedOutput> out;
    std::vector<int32_t> doc;
    size_t at = 0;
  };
  int next_doc = 0;
  auto fresh = [&] {
    return Seq{std::make_unique<engine::runtime::ConstrainedOutput>(*(*spec)->NewConstraint(), gate),
               document(next_doc++), 0};
  };
  std::vector<Seq> seqs;
  for (int b = 0; b < batch; ++b) seqs.push_back(fresh());
  engine::runtime::ConstraintMasks masks(threads, vocab);
  std::vector<double> step_s, accept_s;
  for (int step = 0; step < steps; ++step) {
    std::vector<engine::runtime::ConstrainedOutput*> rows;
    for (auto& s : seqs) rows.push_back(s.out.get());
    const auto t0 = Clock::now();
    masks.Start(rows);
    if (!masks.Wait().ok()) std::exit(2);
    step_s.push_back(Since(t0));
    for (int b = 0; b < batch; ++b) {
      const int32_t token = seqs[b].doc[seqs[b].at++];
      if (!engine::runtime::MaskAllows(masks.row(b), token)) {
        std::fprintf(stderr, "token %d of document %d is not allowed by the mask\n", token, b);
        std::exit(2);
      }
      const auto t1 = Clock::now();
      if (!seqs[b].out->Advance(token).ok()) std::exit(2);
      accept_s.push_back(Since(t1));
      if (seqs[b].out->terminated()) seqs[b] = fresh();
    }
  }
  Row row;
  row.tokenizer = dir.substr(dir.find_last_of('/') + 1);
  row.vocab = vocab;
  row.batch = batch;
  row.threads = threads;
  row.steps = steps;
  row.compile_ms = compile_ms;
  row.mask_step_us = Quantile(step_s, 0.5) * 1e6;
  row.mask_step_p90_us = Quantile(step_s, 0.9) * 1e6;
  row.mask_token_us = row.mask_step_us * std::min(threads, batch) / batch;
  row.accept_token_us = Quantile(accept_s, 0.5) * 1e6;
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Structured-output mask cost per token (bench/grammar/NOTES.md)"};
  std::string root = "../shared/data/tokenizers";
  std::vector<int> batches = {1, 8, 32};
  int threads = 4, steps = 200;
  std::string json_out;
  app.add_option("--root", root, "Folder with qwen3/ and deepseek_v3/ tokenizers");
  app.add_option("--batch", batches, "Sequences per step (default 1 8 32)");
  app.add_option("--threads", threads, "Mask threads (default 4, the engine's)");
  app.add_option("--steps", steps, "Steps per configuration (default 200)");
  app.add_option("--json", json_out, "Write the results here");
  CLI11_PARSE(app, argc, argv);
  std::vector<Row> rows;
  for (auto [name, vocab] : {std::pair{"qwen3", 151936}, std::pair{"deepseek_v3", 129280}}) {
    for (int b : batches) rows.push_back(Run(root + "/" + name, vocab, b, threads, steps));
  }
  std::printf("%-12s %7s %5s %7s %10s %13s %12s %14s %15s\n", "tokenizer", "vocab", "batch",
              "threads", "compile ms", "mask us/step", "p90 us/step", "mask us/token",
              "accept us/token");
  json out = json::array();
  for (const Row& r : rows) {
    std::printf("%-12s %7d %5d %7d %10.1f %13.1f %12.1f %14.1f %15.1f\n", r.tokenizer.c_str(),
                r.vocab, r.batch, r.threads, r.compile_ms, r.mask_step_us, r.mask_step_p90_us,
                r.mask_token_us, r.accept_token_us);
    out.push_back({{"tokenizer", r.tokenizer}, {"vocab", r.vocab}, {"batch", r.batch},
                   {"threads", r.threads}, {"steps", r.steps}, {"compile_ms", r.compile_ms},
                   {"mask_us_per_step", r.mask_step_us},
                   {"mask_us_per_step_p90", r.mask_step_p90_us},
                   {"mask_us_per_token", r.mask_token_us},
                   {"accept_us_per_token", r.accept_token_us}});
  }
  if (!json_out.empty()) {
    std::ofstream(json_out) << json{{"schema", "sparkctl-grammar-mask-bench/v1"},
                                    {"rows", out}}.dump(2)
                            << "\n";
  }
  return 0;
}
