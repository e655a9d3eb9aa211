// encode_bench: single-thread encoding throughput of spark-engine's tokenizer on a few MB of
// mixed text (the test corpus: English, CJK, code, emoji, whitespace runs, Unicode fuzz),
// for each real tokenizer, next to Hugging Face `tokenizers` measured in the same run when
// python3 can import it (hf_encode_bench.py). Prints a table; writes JSON with --json.
//
//   encode_bench [--root ../shared/data/tokenizers] [--mb 4] [--json out.json] [--no-hf]
#include <time.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

// CPU time of this thread: throughput on one core even when the machine is busy.
double ThreadSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Options {
  std::string root = "../shared/data/tokenizers";
  std::string corpus = "tests/fixtures/tokenizer/corpus.json";
  std::string json_out;
  double mb = 4.0;
  bool hf = true;
};

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--root") o.root = next();
    else if (a == "--corpus") o.corpus = next();
    else if (a == "--json") o.json_out = next();
    else if (a == "--mb") o.mb = std::stod(next());
    else if (a == "--no-hf") o.hf = false;
  }
  return o;
}

// Documents drawn (seeded) from the corpus until `mb` megabytes.
std::vector<std::string> MakeDocuments(const Options& o) {
  std::ifstream in(o.corpus);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> pool;
  const nlohmann::json corpus = nlohmann::json::parse(text.str());
  for (const auto& c : corpus["cases"]) pool.push_back(c["text"]);
  if (pool.empty()) {
    std::fprintf(stderr, "%s: no cases (run from the repository root or pass --corpus)\n",
                 o.corpus.c_str());
    std::exit(2);
  }
  std::mt19937 rng(1234);
  std::vector<std::string> docs;
  size_t bytes = 0;
  while (bytes < o.mb * 1e6) {
    std::string doc;
    for (int i = 0; i < 8; ++i) doc += pool[rng() % pool.size()] + "\n";
    bytes += doc.size();
    docs.push_back(std::move(doc));
  }
  return docs;
}

double EncodeMbPerS(const spark::tokenizer::Tokenizer& tok, const std::vector<std::string>& docs,
                    size_t& tokens) {
  double best = 0;
  for (int run = 0; run < 3; ++run) {
    size_t bytes = 0;
    tokens = 0;
    const double start = ThreadSeconds();
    for (const std::string& d : docs) {
      tokens += tok.Encode(d).size();
      bytes += d.size();
    }
    const double s = ThreadSeconds() - start;
    best = std::max(best, bytes / 1e6 / s);
  }
  return best;
}

double HfMbPerS(const Options& o, const std::string& name, const std::string& docs_path) {
  const std::string cmd = "RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false python3 "
                          "bench/tokenizer/hf_encode_bench.py '" + o.root + "/" + name +
                          "/tokenizer.json' '" + docs_path + "' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[256] = {};
  const bool got = std::fgets(buf, sizeof(buf), p) != nullptr;
  const int rc = pclose(p);
  return got && rc == 0 ? std::atof(buf) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseArgs(argc, argv);
  const std::vector<std::string> docs = MakeDocuments(o);
  const std::string docs_path = "/tmp/spark_encode_bench_docs.json";
  std::ofstream(docs_path) << nlohmann::json(docs).dump();
  size_t total = 0;
  for (const auto& d : docs) total += d.size();
  nlohmann::json results = {{"schema", "spark-tokenizer-bench/v1"}, {"bytes", total},
                            {"documents", docs.size()}, {"threads", 1}, {"tokenizers", nlohmann::json::array()}};
  std::printf("%-12s %10s %10s %12s %12s %8s\n", "tokenizer", "load_s", "tokens", "spark_MB/s",
              "hf_MB/s", "ratio");
  for (const std::string name : {"deepseek_v3", "qwen3"}) {
    const auto start = Clock::now();
    auto tok = spark::tokenizer::Tokenizer::FromDir(o.root + "/" + name);
    if (!tok.ok()) {
      std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
      return 2;
    }
    const double load_s = std::chrono::duration<double>(Clock::now() - start).count();
    size_t tokens = 0;
    const double ours = EncodeMbPerS(*tok, docs, tokens);
    const double hf = o.hf ? HfMbPerS(o, name, docs_path) : -1;
    std::printf("%-12s %10.2f %10zu %12.2f %12s %8s\n", name.c_str(), load_s, tokens, ours,
                hf > 0 ? std::to_string(hf).substr(0, 6).c_str() : "n/a",
                hf > 0 ? std::to_string(ours / hf).substr(0, 4).c_str() : "n/a");
    results["tokenizers"].push_back({{"name", name}, {"load_s", load_s}, {"tokens", tokens},
                                     {"spark_mb_per_s", ours},
                                     {"hf_mb_per_s", hf > 0 ? nlohmann::json(hf) : nlohmann::json()}});
  }
  if (!o.json_out.empty()) std::ofstream(o.json_out) << results.dump(2) << "\n";
  return 0;
}
