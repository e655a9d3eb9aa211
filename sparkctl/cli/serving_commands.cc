// `sparkctl check` (the acceptance suite, docs/check.md) and `sparkctl bench serve` (the serving
// benchmark, docs/bench.md) against the model a cluster runs (-c CLUSTER: the endpoint, key and
// profile `sparkctl up` recorded) or any OpenAI-compatible endpoint (--url URL).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/strings.h"
#include "sparkctl/cli/families.h"
#include "sparkctl/inventory/cluster_yaml.h"
#include "sparkctl/profile/profile_yaml.h"
#include "sparkctl/serving/acceptance.h"
#include "sparkctl/serving/bench_report.h"
#include "sparkctl/serving/bench_serve.h"
#include "sparkctl/serving/corpus.h"
#include "sparkctl/serving/quality.h"
#include "sparkctl/up/state_file.h"
#include "sparkctl/weights/sha256.h"

namespace spark::cli {
namespace {

using nlohmann::json;

struct EndpointFlags {
  std::string cluster_file = "cluster.yaml";
  bool cluster_given = false;
  std::string url;
  std::string api_key_file;
  std::string ca_file;
  std::string model;
  std::string state_root = up::kDefaultStateRoot;
  int timeout_s = 600;
};

void AddEndpointFlags(CLI::App* cmd, EndpointFlags& f) {
  AddClusterFlag(cmd, &f.cluster_file,
                 "Cluster whose running model to use (default ./cluster.yaml; see --url)");
  cmd->add_option("--url", f.url,
                  "Any OpenAI-compatible endpoint instead, http[s]://HOST:PORT (a /v1 suffix is "
                  "fine)");
  cmd->add_option("--cacert", f.ca_file,
                  "https: trust this PEM CA or certificate (e.g. the cert.pem of `sparkctl tls "
                  "selfsigned`) instead of the system's");
  cmd->add_option("--api-key-file", f.api_key_file,
                  "File whose first line is the Bearer key (default with -c: the profile's "
                  "api.key_file)");
  cmd->add_option("--model", f.model, "Model name to request (default: the first /v1/models id)");
  cmd->add_option("--state-root", f.state_root,
                  "Where `sparkctl up` recorded the running model (default /var/lib/sparkctl/up)");
  cmd->add_option("--timeout", f.timeout_s, "Seconds one request may take (default 600)");
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<std::string> ReadKey(const std::string& path) {
  SPARK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const std::string key(Trim(line));
    if (!key.empty() && key[0] != '#') return key;
  }
  return InvalidArgumentError(path + ": no key in it (one key per line)");
}

bool IsLoopbackHost(const std::string& h) {
  return h == "localhost" || h == "::1" || h.starts_with("127.");
}

struct Resolved {
  serving::Endpoint endpoint;
  serving::BenchIdentity identity;
};

// The endpoint of -c CLUSTER: rank 0's node and the profile's port, reachable from here only
// when the profile binds a non-loopback address.
Result<Resolved> ResolveCluster(const EndpointFlags& f, Resolved r) {
  SPARK_ASSIGN_OR_RETURN(netplan::ClusterSpec spec, inventory::LoadClusterFile(f.cluster_file));
  const std::string dir = up::StateDir(f.state_root, spec.name);
  Result<up::UpState> state = up::LoadState(dir);
  if (!state.ok()) {
    return FailedPreconditionError("no model runs on cluster " + spec.name + " (" +
                                   state.status().message() + "); start one with `sparkctl up -c " +
                                   f.cluster_file + " -p PROFILE`, or give --url");
  }
  SPARK_ASSIGN_OR_RETURN(profile::Profile p, profile::LoadProfileFile(state->profile_file));
  std::string host = p.api.bind;
  if (IsLoopbackHost(host)) {
    return FailedPreconditionError(
        "the model on " + spec.name + " binds " + p.api.bind + " on node " + state->plan.api_node +
        " (" + state->profile_file +
        ": api.bind), which this machine cannot reach; bind "
        "0.0.0.0 with an api.key_file, or forward the port (ssh -L " +
        std::to_string(p.api.port) + ":127.0.0.1:" + std::to_string(p.api.port) + " " +
        state->plan.api_node + ") and give --url http://127.0.0.1:" + std::to_string(p.api.port));
  }
  if (host == "0.0.0.0" || host == "::") {
    for (const netplan::NodeSpec& n : spec.nodes) {
      if (n.name == state->plan.api_node) host = n.address;
    }
  }
  SPARK_ASSIGN_OR_RETURN(r.endpoint.url,
                         serving::ParseUrl(std::string(p.api.tls.enabled() ? "https://" : "http://") +
                                           host + ":" + std::to_string(p.api.port)));
  if (f.api_key_file.empty() && !p.api.key_file.empty()) {
    Result<std::string> key = ReadKey(p.api.key_file);
    if (!key.ok()) {
      return key.status().WithContext(
          "the profile's api.key_file (give --api-key-file with a "
          "copy of the key)");
    }
    r.endpoint.api_key = *key;
  }
  if (r.endpoint.model.empty()) r.endpoint.model = p.model.served_name;
  SPARK_ASSIGN_OR_RETURN(std::string cluster_text, ReadFile(f.cluster_file));
  SPARK_ASSIGN_OR_RETURN(std::string profile_text, ReadFile(state->profile_file));
  r.identity.cluster = spec.name;
  r.identity.cluster_sha256 = weights::Sha256Hex(cluster_text);
  r.identity.profile = state->profile_file;
  r.identity.profile_sha256 = weights::Sha256Hex(profile_text);
  return r;
}

Result<Resolved> Resolve(const EndpointFlags& f) {
  Resolved r;
  r.endpoint.model = f.model;
  if (!f.url.empty() && f.cluster_given) {
    return InvalidArgumentError("give -c CLUSTER or --url URL, not both");
  }
  if (!f.api_key_file.empty()) {
    SPARK_ASSIGN_OR_RETURN(r.endpoint.api_key, ReadKey(f.api_key_file));
  }
  if (!f.url.empty()) {
    SPARK_ASSIGN_OR_RETURN(r.endpoint.url, serving::ParseUrl(f.url));
  } else {
    SPARK_ASSIGN_OR_RETURN(r, ResolveCluster(f, std::move(r)));
  }
  if (!f.ca_file.empty() && !r.endpoint.url.tls) {
    return InvalidArgumentError("--cacert " + f.ca_file + ": the endpoint " +
                                r.endpoint.url.text + " is not https://");
  }
  r.endpoint.url.ca_file = f.ca_file;
  if (r.endpoint.model.empty()) {
    SPARK_ASSIGN_OR_RETURN(r.endpoint.model, serving::FirstModel(r.endpoint));
  }
  r.identity.endpoint = r.endpoint.url.text;
  r.identity.model = r.endpoint.model;
  r.identity.build = "unknown";
  if (auto v = serving::GetJson(r.endpoint, "/version", std::chrono::seconds(10));
      v.ok() && v->status == 200 && v->body.is_object()) {
    r.identity.build = v->body.value("build", "unknown");
    r.identity.server_version = v->body.value("version", "");
  }
  r.identity.corpus_sha256 = serving::CorpusSha256();
  return r;
}

// ---- check ----

struct CheckFlags {
  EndpointFlags endpoint;
  bool random_weights = false;
  int concurrency = 8;
  int long_prompt_tokens = 0;
  bool json = false;
  bool quality = false;
  std::string profile_file;  // with --url: the profile whose quality reference to use
};

// The profile's quality reference (-c: the profile `up` ran; --profile FILE), or none.
Result<std::optional<serving::QualityReference>> LoadQualityReference(const std::string& file) {
  if (file.empty()) return std::optional<serving::QualityReference>();
  SPARK_ASSIGN_OR_RETURN(profile::Profile p, profile::LoadProfileFile(file));
  if (!p.quality) return std::optional<serving::QualityReference>();
  return std::optional<serving::QualityReference>(serving::QualityReference{
      profile::ResolvedQualityText(p), p.quality->perplexity, p.quality->tolerance,
      p.quality->context});
}

int RunCheck(const CheckFlags& f) {
  Result<Resolved> r = Resolve(f.endpoint);
  if (!r.ok()) return ReportError(r.status(), f.json ? serving::kCheckSchema : "");
  if (!f.profile_file.empty() && !f.quality) {
    return ReportError(InvalidArgumentError("--profile is read by --quality only; add --quality"),
                       f.json ? serving::kCheckSchema : "");
  }
  serving::AcceptanceOptions o;
  o.random_weights = f.random_weights;
  o.concurrency = f.concurrency;
  o.long_prompt_tokens = f.long_prompt_tokens;
  o.timeout = std::chrono::seconds(f.endpoint.timeout_s);
  o.on_result = [](const serving::CheckResult& c) {
    std::fprintf(stderr, "  %-19s %s\n", c.name.c_str(), serving::VerdictName(c.verdict));
  };
  std::fprintf(stderr, "checking %s at %s\n", r->endpoint.model.c_str(),
               r->endpoint.url.text.c_str());
  std::vector<serving::CheckResult> results;
  if (f.quality) {  // the quality gate alone
    const std::string file = f.profile_file.empty() ? r->identity.profile : f.profile_file;
    Result<std::optional<serving::QualityReference>> ref = LoadQualityReference(file);
    if (!ref.ok()) return ReportError(ref.status(), f.json ? serving::kCheckSchema : "");
    results.push_back(serving::QualityCheck(r->endpoint, *ref, file, o.timeout));
    o.on_result(results.back());
  } else {
    results = serving::RunAcceptance(r->endpoint, o);
  }
  if (f.json) {
    json doc = serving::AcceptanceJson(r->endpoint, o, results);
    doc["build"] = r->identity.build;
    std::printf("%s\n", doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fputs(serving::AcceptanceTable(results).c_str(), stdout);
    std::printf("%s\n",
                serving::AllPassed(results) ? "all checks passed" : "some checks FAILED (exit 2)");
  }
  return serving::AllPassed(results) ? kExitOk : kExitFailed;
}

// ---- bench serve ----

struct BenchServeFlags {
  EndpointFlags endpoint;
  std::string concurrency = "1,2,4,8";
  std::string context = "1k,32k,128k";
  int output_tokens = 128;
  int repeats = 3;
  bool shared_prefix = false;
  bool json = false;
  std::string out_file;
  std::string plot_file;
  std::string compare_file;
};

int RunBenchServe(const BenchServeFlags& f) {
  const std::string schema = f.json ? serving::kBenchServeSchema : "";
  serving::BenchServeOptions o;
  Result<std::vector<int>> conc = serving::ParseSizes(f.concurrency, "--concurrency");
  if (!conc.ok()) return ReportError(conc.status(), schema);
  Result<std::vector<int>> ctx = serving::ParseSizes(f.context, "--context");
  if (!ctx.ok()) return ReportError(ctx.status(), schema);
  if (f.repeats < 1 || f.output_tokens < 2) {
    return ReportError(InvalidArgumentError("--repeats must be >= 1 and --output-tokens >= 2 "
                                            "(decode rates need two tokens)"),
                       schema);
  }
  std::optional<serving::SavedRun> before;
  if (!f.compare_file.empty()) {
    Result<std::string> text = ReadFile(f.compare_file);
    if (!text.ok()) return ReportError(text.status(), schema);
    Result<serving::SavedRun> saved =
        serving::ParseBenchJson(json::parse(*text, nullptr, false), f.compare_file);
    if (!saved.ok()) return ReportError(saved.status(), schema);
    before = std::move(*saved);
  }
  Result<Resolved> r = Resolve(f.endpoint);
  if (!r.ok()) return ReportError(r.status(), schema);
  if (before) {  // Refused before spending time measuring.
    if (Status s = serving::CheckComparable(r->identity, before->identity); !s.ok()) {
      return ReportError(s.WithContext("--compare " + f.compare_file), schema);
    }
  }
  o.concurrency = *conc;
  o.contexts = *ctx;
  o.output_tokens = f.output_tokens;
  o.repeats = f.repeats;
  o.shared_prefix = f.shared_prefix;
  o.timeout = std::chrono::seconds(f.endpoint.timeout_s);
  const bool tty = isatty(fileno(stderr));
  o.on_progress = [tty](size_t cell, size_t cells, int round, int done, int streams,
                        const std::string& what) {
    std::fprintf(stderr, "%s[cell %zu/%zu] %s, round %d: %d/%d streams done%s", tty ? "\r" : "",
                 cell + 1, cells, what.c_str(), round, done, streams, tty ? "   " : "\n");
    if (tty && done == streams) std::fputc('\n', stderr);
  };
  Result<serving::BenchServeRun> run = serving::RunBenchServe(r->endpoint, r->identity, o);
  if (!run.ok()) return ReportError(run.status(), schema);
  const std::vector<serving::CellSummary> cells = serving::Summarize(*run);
  const json doc = serving::BenchJson(*run);
  if (!f.out_file.empty()) {
    std::ofstream out(f.out_file);
    out << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!out) return ReportError(InternalError(f.out_file + ": cannot write"), schema);
  }
  if (!f.plot_file.empty()) {
    std::ofstream out(f.plot_file);
    out << serving::BenchSvg(*run, cells);
    if (!out) return ReportError(InternalError(f.plot_file + ": cannot write"), schema);
  }
  if (f.json) {
    std::printf("%s\n", doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fputs(serving::BenchTable(*run, cells).c_str(), stdout);
    if (before) std::fputs(("\n" + serving::CompareTable(cells, *before)).c_str(), stdout);
  }
  int errors = 0;
  for (const serving::CellSummary& c : cells) errors += c.errors;
  if (errors > 0) std::fprintf(stderr, "%d stream(s) failed; see the errors column\n", errors);
  return errors > 0 ? kExitFailed : kExitOk;
}

}  // namespace

void RegisterCheckCommands(CLI::App& parent, CommandContext& context) {
  auto f = std::make_shared<CheckFlags>();
  CLI::App* cmd = parent.add_subcommand(
      "check",
      "Acceptance checks of a running model: answers, JSON Schema output, thinking, "
      "tools, streaming, long prompts, concurrency");
  AddEndpointFlags(cmd, f->endpoint);
  cmd->add_flag("--random-weights", f->random_weights,
                "The model has random weights: content checks report \"not judged\", protocol "
                "checks still run");
  cmd->add_option("--concurrency", f->concurrency, "Requests of the concurrent check (default 8)");
  cmd->add_option("--long-prompt-tokens", f->long_prompt_tokens,
                  "Prompt length of the long-prompt check (default min(8000, max_model_len / 2))");
  cmd->add_flag("--quality", f->quality,
                "Only the quality gate: the served model's perplexity on the profile's "
                "quality.text against its recorded reference (docs/evaluation.md)");
  cmd->add_option("--profile", f->profile_file,
                  "With --url and --quality: the profile whose quality reference to use (-c "
                  "takes the profile `up` ran)");
  AddJsonFlag(cmd, &f->json, serving::kCheckSchema);
  SetExample(cmd,
             "sparkctl check -c cluster.yaml\n"
             "  sparkctl check --url http://10.0.0.1:8000 --api-key-file key.txt --json\n"
             "  sparkctl check -c cluster.yaml --quality\n"
             "Exit status 2 when any check fails.");
  cmd->callback([f, cmd, &context] {
    f->endpoint.cluster_given = cmd->count("--cluster") > 0;
    context.exit_code = RunCheck(*f);
  });
}

void RegisterBenchServeCommand(CLI::App* bench, CommandContext& context) {
  auto f = std::make_shared<BenchServeFlags>();
  CLI::App* cmd = bench->add_subcommand(
      "serve",
      "Serving benchmark: TTFT, prefill and decode tok/s, P50/P95 over a matrix of "
      "context lengths and concurrent streams (protocol in docs/bench.md)");
  AddEndpointFlags(cmd, f->endpoint);
  cmd->add_option("--concurrency", f->concurrency, "Concurrent streams, a list (default 1,2,4,8)");
  cmd->add_option("--context", f->context, "Prompt tokens, a list; k = 1024 (default 1k,32k,128k)");
  cmd->add_option("--output-tokens", f->output_tokens,
                  "Tokens each stream generates, exactly (min_tokens + ignore_eos; default 128)");
  cmd->add_option("--repeats", f->repeats,
                  "Rounds per cell; 95% confidence intervals are over rounds (default 3)");
  cmd->add_flag("--shared-prefix", f->shared_prefix,
                "Send every stream of a cell the same text (prefix-cache hits); default: a "
                "distinct prompt per stream");
  cmd->add_option("--out", f->out_file, "Also write the JSON document to this file");
  cmd->add_option("--plot", f->plot_file, "Write an SVG plot of the matrix to this file");
  cmd->add_option("--compare", f->compare_file,
                  "An earlier --json result to compare with; refused when its cluster, profile "
                  "or build differ");
  AddJsonFlag(cmd, &f->json, serving::kBenchServeSchema);
  SetExample(cmd,
             "sparkctl bench serve -c cluster.yaml --concurrency 1,2,4,8 --context "
             "1k,32k,128k --plot serve.svg --out serve.json\n"
             "  sparkctl bench serve --url http://127.0.0.1:8000 --context 1k --repeats 5 "
             "--compare serve.json");
  cmd->callback([f, cmd, &context] {
    f->endpoint.cluster_given = cmd->count("--cluster") > 0;
    context.exit_code = RunBenchServe(*f);
  });
}

}  // namespace spark::cli
