#include "sparkctl/serving/bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>

namespace spark::serving {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Two-sided 97.5% quantiles of Student's t for 1..30 degrees of freedom; 1.96 beyond.
double TQuantile(int df) {
  static constexpr double kT[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                  2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                  2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                  2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  return df >= 1 && df <= 30 ? kT[df - 1] : 1.96;
}

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string WithCi(const Estimate& e, const char* format) {
  if (e.n == 0) return "-";
  return Fmt(format, e.mean) + (e.n > 1 ? " ±" + Fmt(format, e.ci95) : "");
}

std::string Tokens(int n) {
  return n % 1024 == 0 ? std::to_string(n / 1024) + "k" : std::to_string(n);
}

ordered_json EstimateJson(const Estimate& e) {
  return {{"mean", e.mean}, {"ci95", e.ci95}, {"rounds", e.n}};
}

Estimate EstimateFromJson(const json& j) {
  Estimate e;
  if (!j.is_object()) return e;
  e.mean = j.value("mean", 0.0);
  e.ci95 = j.value("ci95", 0.0);
  e.n = j.value("rounds", 0);
  return e;
}

}  // namespace

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (rank - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

Estimate MeanCi95(const std::vector<double>& v) {
  Estimate e;
  e.n = static_cast<int>(v.size());
  if (v.empty()) return e;
  e.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  if (v.size() < 2) return e;
  double ss = 0;
  for (double x : v) ss += (x - e.mean) * (x - e.mean);
  const double sd = std::sqrt(ss / static_cast<double>(v.size() - 1));
  e.ci95 = TQuantile(e.n - 1) * sd / std::sqrt(static_cast<double>(v.size()));
  return e;
}

std::vector<CellSummary> Summarize(const BenchServeRun& run) {
  std::vector<CellSummary> out;
  for (const BenchCell& cell : run.cells) {
    CellSummary s;
    s.context = cell.context;
    s.concurrency = cell.concurrency;
    s.skipped = cell.skipped;
    std::vector<double> ttft, e2e, prefill_rounds, decode_rounds, aggregate_rounds;
    double prompt_total = 0, cached_total = 0;
    for (const std::vector<StreamSample>& round : cell.rounds) {
      std::vector<double> prefill, decode;
      double tokens = 0, first = 1e300, last = 0;
      for (const StreamSample& x : round) {
        if (!x.ok) {
          if (s.errors++ == 0) s.first_error = x.error;
          continue;
        }
        ++s.streams;
        if (x.token_events < x.completion_tokens) ++s.clumped_streams;
        ttft.push_back(x.ttft_s);
        e2e.push_back(x.e2e_s);
        prompt_total += x.prompt_tokens;
        cached_total += x.cached_tokens;
        if (x.ttft_s > 0) prefill.push_back(x.prompt_tokens / x.ttft_s);
        if (x.decode_s > 0 && x.completion_tokens > 1) {
          decode.push_back((x.completion_tokens - 1) / x.decode_s);
          tokens += x.completion_tokens - 1;
          first = std::min(first, x.first_token_at);
          last = std::max(last, x.last_token_at);
        }
      }
      if (!prefill.empty()) prefill_rounds.push_back(MeanCi95(prefill).mean);
      if (!decode.empty()) decode_rounds.push_back(MeanCi95(decode).mean);
      if (last > first) aggregate_rounds.push_back(tokens / (last - first));
    }
    s.ttft_p50 = Percentile(ttft, 50);
    s.ttft_p95 = Percentile(ttft, 95);
    s.e2e_p50 = Percentile(e2e, 50);
    s.e2e_p95 = Percentile(e2e, 95);
    s.prefill_tps = MeanCi95(prefill_rounds);
    s.decode_tps = MeanCi95(decode_rounds);
    s.aggregate_tps = MeanCi95(aggregate_rounds);
    s.mean_prompt_tokens = s.streams > 0 ? prompt_total / s.streams : 0;
    s.cached_fraction = prompt_total > 0 ? cached_total / prompt_total : 0;
    out.push_back(std::move(s));
  }
  return out;
}

ordered_json BenchJson(const BenchServeRun& run) {
  const std::vector<CellSummary> summaries = Summarize(run);
  const BenchIdentity& id = run.identity;
  ordered_json cells = ordered_json::array();
  for (size_t i = 0; i < run.cells.size(); ++i) {
    const BenchCell& cell = run.cells[i];
    const CellSummary& s = summaries[i];
    ordered_json rounds = ordered_json::array();
    for (const auto& round : cell.rounds) {
      ordered_json streams = ordered_json::array();
      for (const StreamSample& x : round) {
        streams.push_back({{"ok", x.ok},
                           {"error", x.error},
                           {"ttft_s", x.ttft_s},
                           {"decode_s", x.decode_s},
                           {"e2e_s", x.e2e_s},
                           {"first_token_at_s", x.first_token_at},
                           {"last_token_at_s", x.last_token_at},
                           {"prompt_tokens", x.prompt_tokens},
                           {"completion_tokens", x.completion_tokens},
                           {"cached_tokens", x.cached_tokens},
                           {"token_events", x.token_events}});
      }
      rounds.push_back(streams);
    }
    cells.push_back({{"context", cell.context},
                     {"concurrency", cell.concurrency},
                     {"skipped", cell.skipped},
                     {"streams", s.streams},
                     {"errors", s.errors},
                     {"first_error", s.first_error},
                     {"mean_prompt_tokens", s.mean_prompt_tokens},
                     {"cached_fraction", s.cached_fraction},
                     {"ttft_s", {{"p50", s.ttft_p50}, {"p95", s.ttft_p95}}},
                     {"e2e_s", {{"p50", s.e2e_p50}, {"p95", s.e2e_p95}}},
                     {"prefill_tokens_per_s", EstimateJson(s.prefill_tps)},
                     {"decode_tokens_per_s_per_stream", EstimateJson(s.decode_tps)},
                     {"decode_tokens_per_s_aggregate", EstimateJson(s.aggregate_tps)},
                     {"clumped_streams", s.clumped_streams},
                     {"rounds", rounds}});
  }
  return {{"schema", kBenchServeSchema},
          {"started", run.started},
          {"identity",
           {{"endpoint", id.endpoint},
            {"model", id.model},
            {"cluster", id.cluster},
            {"cluster_sha256", id.cluster_sha256},
            {"profile", id.profile},
            {"profile_sha256", id.profile_sha256},
            {"build", id.build},
            {"server_version", id.server_version},
            {"corpus_sha256", id.corpus_sha256}}},
          {"options",
           {{"concurrency", run.options.concurrency},
            {"contexts", run.options.contexts},
            {"output_tokens", run.options.output_tokens},
            {"repeats", run.options.repeats},
            {"shared_prefix", run.options.shared_prefix}}},
          {"chars_per_token", run.chars_per_token},
          {"exact_prompts", run.exact_prompts},
          {"max_model_len", run.max_model_len},
          {"cells", cells}};
}

Result<SavedRun> ParseBenchJson(const json& doc, const std::string& file) {
  if (!doc.is_object() || doc.value("schema", "") != kBenchServeSchema) {
    return InvalidArgumentError(file + ": not a `sparkctl bench serve --json` document (schema " +
                                std::string(kBenchServeSchema) + ")");
  }
  SavedRun r;
  const json id = doc.value("identity", json::object());
  r.identity.endpoint = id.value("endpoint", "");
  r.identity.model = id.value("model", "");
  r.identity.cluster = id.value("cluster", "");
  r.identity.cluster_sha256 = id.value("cluster_sha256", "");
  r.identity.profile = id.value("profile", "");
  r.identity.profile_sha256 = id.value("profile_sha256", "");
  r.identity.build = id.value("build", "");
  r.identity.server_version = id.value("server_version", "");
  r.identity.corpus_sha256 = id.value("corpus_sha256", "");
  for (const json& c : doc.value("cells", json::array())) {
    CellSummary s;
    s.context = c.value("context", 0);
    s.concurrency = c.value("concurrency", 0);
    s.skipped = c.value("skipped", "");
    s.streams = c.value("streams", 0);
    s.errors = c.value("errors", 0);
    s.clumped_streams = c.value("clumped_streams", 0);
    s.ttft_p50 = c.value("ttft_s", json::object()).value("p50", 0.0);
    s.ttft_p95 = c.value("ttft_s", json::object()).value("p95", 0.0);
    s.decode_tps = EstimateFromJson(c.value("decode_tokens_per_s_per_stream", json()));
    s.aggregate_tps = EstimateFromJson(c.value("decode_tokens_per_s_aggregate", json()));
    s.prefill_tps = EstimateFromJson(c.value("prefill_tokens_per_s", json()));
    r.cells.push_back(s);
  }
  return r;
}

Status CheckComparable(const BenchIdentity& a, const BenchIdentity& b) {
  std::string why;
  auto differ = [&](const char* what, const std::string& x, const std::string& y) {
    if (x != y) {
      why += std::string(why.empty() ? "" : "; ") + what + " differs (" + (x.empty() ? "none" : x) +
             " vs " + (y.empty() ? "none" : y) + ")";
    }
  };
  differ("cluster", a.cluster_sha256.empty() ? a.endpoint : a.cluster_sha256,
         b.cluster_sha256.empty() ? b.endpoint : b.cluster_sha256);
  differ("profile", a.profile_sha256, b.profile_sha256);
  differ("build", a.build, b.build);
  if (why.empty()) return Status::Ok();
  return FailedPreconditionError("the runs were not measured on the same deployment: " + why +
                                 "; compare runs of one cluster, profile and build");
}

std::string BenchTable(const BenchServeRun& run, const std::vector<CellSummary>& cells) {
  std::string out = "model " + run.identity.model + " at " + run.identity.endpoint + ", build " +
                    run.identity.build + ", " + std::to_string(run.options.output_tokens) +
                    " output tokens per stream, " + std::to_string(run.options.repeats) +
                    " round(s), ± is the 95% CI over rounds\n";
  char line[320];
  std::snprintf(line, sizeof line, "%-7s %4s  %-17s %-15s %-17s %-17s %-17s %s\n", "context",
                "conc", "TTFT p50/p95 s", "e2e p50/p95 s", "prefill tok/s", "decode tok/s/str",
                "decode tok/s agg", "errors");
  out += line;
  for (const CellSummary& c : cells) {
    if (!c.skipped.empty()) {
      std::snprintf(line, sizeof line, "%-7s %4d  skipped: %s\n", Tokens(c.context).c_str(),
                    c.concurrency, c.skipped.c_str());
      out += line;
      continue;
    }
    std::snprintf(line, sizeof line, "%-7s %4d  %-17s %-15s %-17s %-17s %-17s %d%s\n",
                  Tokens(c.context).c_str(), c.concurrency,
                  (Fmt("%.3f", c.ttft_p50) + "/" + Fmt("%.3f", c.ttft_p95)).c_str(),
                  (Fmt("%.2f", c.e2e_p50) + "/" + Fmt("%.2f", c.e2e_p95)).c_str(),
                  WithCi(c.prefill_tps, "%.0f").c_str(),
                  (WithCi(c.decode_tps, "%.1f") + (c.clumped_streams > 0 ? "*" : "")).c_str(),
                  (WithCi(c.aggregate_tps, "%.1f") + (c.clumped_streams > 0 ? "*" : "")).c_str(),
                  c.errors, c.first_error.empty() ? "" : ("  " + c.first_error).c_str());
    out += line;
  }
  int clumped = 0, streams = 0;
  for (const CellSummary& c : cells) {
    clumped += c.clumped_streams;
    streams += c.streams;
  }
  if (clumped > 0) {
    out += "* " + std::to_string(clumped) + " of " + std::to_string(streams) +
           " streams got their tokens in fewer events than tokens (the server holds text until "
           "it is whole UTF-8, as random weights often need): their decode time starts late "
           "and these rates are overstated\n";
  }
  return out;
}

std::string CompareTable(const std::vector<CellSummary>& now, const SavedRun& before) {
  std::string out =
      "context conc  decode tok/s agg (before -> now, change)   TTFT p50 s (before -> now)\n";
  for (const CellSummary& c : now) {
    for (const CellSummary& b : before.cells) {
      if (b.context != c.context || b.concurrency != c.concurrency || !c.skipped.empty() ||
          !b.skipped.empty()) {
        continue;
      }
      const double change =
          b.aggregate_tps.mean > 0 ? 100.0 * (c.aggregate_tps.mean / b.aggregate_tps.mean - 1) : 0;
      char line[200];
      std::snprintf(line, sizeof line,
                    "%-7s %4d  %9.1f -> %9.1f  %+6.1f%%                 %.3f -> %.3f\n",
                    Tokens(c.context).c_str(), c.concurrency, b.aggregate_tps.mean,
                    c.aggregate_tps.mean, change, b.ttft_p50, c.ttft_p50);
      out += line;
    }
  }
  return out;
}

std::string BenchSvg(const BenchServeRun& run, const std::vector<CellSummary>& cells) {
  constexpr int kW = 900, kH = 460, kPanelW = 400, kPanelH = 260, kLeft = 60, kTop = 50;
  std::map<int, std::vector<const CellSummary*>> by_context;
  std::vector<int> concurrency = run.options.concurrency;
  std::sort(concurrency.begin(), concurrency.end());
  for (const CellSummary& c : cells) {
    if (c.skipped.empty() && c.streams > 0) by_context[c.context].push_back(&c);
  }
  static const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c",
                                   "#ff7f0e", "#9467bd", "#8c564b"};
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(kW) +
                    "\" height=\"" + std::to_string(kH) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" "
                    "height=\"100%\" fill=\"white\"/>\n<text x=\"10\" y=\"20\" font-size=\"14\">" +
                    "sparkctl bench serve: " + run.identity.model + ", build " +
                    run.identity.build + "</text>\n";
  struct Panel {
    const char* title;
    double (*value)(const CellSummary&);
  };
  const Panel panels[] = {
      {"aggregate decode tok/s", [](const CellSummary& c) { return c.aggregate_tps.mean; }},
      {"TTFT p50 (s)", [](const CellSummary& c) { return c.ttft_p50; }}};
  for (int p = 0; p < 2; ++p) {
    const int x0 = kLeft + p * (kPanelW + 60), y0 = kTop;
    double top = 0;
    for (const CellSummary& c : cells) top = std::max(top, panels[p].value(c));
    top = top > 0 ? top * 1.1 : 1;
    svg += "<text x=\"" + std::to_string(x0) + "\" y=\"" + std::to_string(y0 - 8) + "\">" +
           panels[p].title + " vs concurrent streams</text>\n";
    svg += "<rect x=\"" + std::to_string(x0) + "\" y=\"" + std::to_string(y0) + "\" width=\"" +
           std::to_string(kPanelW) + "\" height=\"" + std::to_string(kPanelH) +
           "\" fill=\"none\" stroke=\"#888\"/>\n";
    auto x_of = [&](int conc) {
      const auto it = std::find(concurrency.begin(), concurrency.end(), conc);
      const size_t i = static_cast<size_t>(it - concurrency.begin());
      const double frac = concurrency.size() > 1 ? double(i) / double(concurrency.size() - 1) : 0.5;
      return x0 + 20 + frac * (kPanelW - 40);
    };
    auto y_of = [&](double v) { return y0 + kPanelH - v / top * kPanelH; };
    for (int conc : concurrency) {
      svg += "<text x=\"" + Fmt("%.1f", x_of(conc)) + "\" y=\"" +
             std::to_string(y0 + kPanelH + 16) + "\" text-anchor=\"middle\">" +
             std::to_string(conc) + "</text>\n";
    }
    for (int t = 0; t <= 4; ++t) {
      const double v = top * t / 4;
      svg += "<text x=\"" + std::to_string(x0 - 4) + "\" y=\"" + Fmt("%.1f", y_of(v) + 4) +
             "\" text-anchor=\"end\">" + Fmt(v >= 10 ? "%.0f" : "%.2f", v) + "</text>\n";
    }
    int colour = 0;
    for (const auto& [context, list] : by_context) {
      std::string points;
      for (const CellSummary* c : list) {
        points +=
            Fmt("%.1f", x_of(c->concurrency)) + "," + Fmt("%.1f", y_of(panels[p].value(*c))) + " ";
      }
      const char* col = kColours[colour++ % 6];
      svg += "<polyline fill=\"none\" stroke=\"" + std::string(col) +
             "\" stroke-width=\"2\" points=\"" + points + "\"/>\n";
      if (p == 0) {
        svg += "<text x=\"" + std::to_string(kLeft) + "\" y=\"" +
               std::to_string(kTop + kPanelH + 40 + 14 * (colour - 1)) + "\" fill=\"" + col +
               "\">context " + Tokens(context) + " tokens</text>\n";
      }
    }
  }
  return svg + "</svg>\n";
}

}  // namespace spark::serving
