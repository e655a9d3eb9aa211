// nccl-tests' report format and arithmetic (see nccl_format.h).
#include "sparkctl/bench/nccl_format.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "base/strings.h"

namespace spark::bench {
namespace {

std::string Printf(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

std::string Body(const Measurement& m) {
  std::string time = FormatFloat(m.time_us, 7), alg = FormatFloat(m.bw.alg_gbps, 6),
              bus = FormatFloat(m.bw.bus_gbps, 6);
  if (m.wrong < 0) return Printf("  %7s  %6s  %6s    N/A", time.c_str(), alg.c_str(), bus.c_str());
  return Printf("  %7s  %6s  %6s  %6g", time.c_str(), alg.c_str(), bus.c_str(),
                static_cast<double>(m.wrong));
}

nlohmann::ordered_json GroupJson(const Measurement& m) {
  nlohmann::ordered_json j = {{"time", m.time_us}, {"alg_bw", m.bw.alg_gbps},
                              {"bus_bw", m.bw.bus_gbps}};
  j["wrong"] = m.wrong < 0 ? nlohmann::ordered_json("N/A") : nlohmann::ordered_json(m.wrong);
  return j;
}

}  // namespace

std::string_view CollectiveName(Collective c) {
  return c == Collective::kAllReduce ? "allreduce" : "allgather";
}

std::string_view NcclTestsName(Collective c) {
  return c == Collective::kAllReduce ? "all_reduce_perf" : "all_gather_perf";
}

Result<Collective> ParseCollective(std::string_view name) {
  if (name == "allreduce") return Collective::kAllReduce;
  if (name == "allgather") return Collective::kAllGather;
  return InvalidArgumentError("unknown collective '" + std::string(name) +
                              "': use allreduce or allgather");
}

Result<size_t> ParseByteSize(std::string_view text, std::string_view flag) {
  std::string t(Trim(text));
  size_t mult = 1;
  if (!t.empty() && std::isalpha(static_cast<unsigned char>(t.back()))) {
    switch (std::toupper(static_cast<unsigned char>(t.back()))) {
      case 'K': mult = 1ull << 10; break;
      case 'M': mult = 1ull << 20; break;
      case 'G': mult = 1ull << 30; break;
      default: mult = 0;
    }
    t.pop_back();
  }
  std::optional<int64_t> n = ParseInt(t);
  if (mult == 0 || !n || *n < 0) {
    return InvalidArgumentError(std::string(flag) + " '" + std::string(text) +
                                "' is not a size: give bytes, optionally with K, M or G "
                                "(binary multiples), e.g. 8, 32M, 1G");
  }
  return static_cast<size_t>(*n) * mult;
}

std::vector<size_t> SizeSweep(size_t min_bytes, size_t max_bytes, size_t factor, size_t step_bytes) {
  std::vector<size_t> out;
  if (factor <= 1 && step_bytes == 0) step_bytes = 1 << 20;  // nccl-tests' default -i
  for (size_t s = min_bytes; s <= max_bytes;) {
    out.push_back(s);
    size_t next = factor > 1 ? s * factor : s + step_bytes;
    if (next <= s) break;  // overflow, or -b 0 with a factor
    s = next;
  }
  return out;
}

CollectiveSizes SizesFor(Collective c, size_t size_bytes, size_t elt_size, int nranks) {
  CollectiveSizes s;
  size_t count = size_bytes / elt_size;
  if (c == Collective::kAllReduce) {
    s.send_count = s.recv_count = s.param_count = count;
  } else {
    size_t n = static_cast<size_t>(nranks);
    size_t base = (count / n) & ~(16 / elt_size - 1);  // each share a multiple of 16 bytes
    s.send_count = s.param_count = s.send_inplace_offset = base;
    s.recv_count = base * n;
  }
  s.report_bytes = std::max(s.send_count, s.recv_count) * elt_size;
  return s;
}

Bandwidth ComputeBandwidth(Collective c, size_t count, size_t elt_size, double seconds, int nranks) {
  double n = nranks;
  double bytes = static_cast<double>(count * elt_size) * (c == Collective::kAllGather ? n : 1);
  Bandwidth b;
  b.alg_gbps = seconds > 0 ? bytes / 1.0e9 / seconds : 0;
  b.bus_gbps = b.alg_gbps * (c == Collective::kAllReduce ? 2 * (n - 1) / n : (n - 1) / n);
  return b;
}

std::string FormatFloat(double value, int width) {
  char buf[64];
  for (const char* fmt : {"%*.2f", "%*.1f", "%*.0f"}) {
    if (std::snprintf(buf, sizeof(buf), fmt, width, value) <= width) return buf;
  }
  std::snprintf(buf, sizeof(buf), width >= 7 ? "%*.1e" : "%*.0e", width, value);
  return std::string(buf).substr(0, width);
}

std::string DeviceLine(int rank, int pid, const std::string& host, const std::string& device,
                       const std::string& what) {
  return Printf("  Rank %2d Group  0 Pid %6d on %10s device %2s %s", rank, pid, host.c_str(),
                device.c_str(), what.c_str());
}

std::string ReportHeader(const ReportConfig& c) {
  std::string out;
  if (c.backend == "nccl") {
    out += Printf("# spark-bench (nccl-tests 2.19.6 format) backend nccl nccl-headers=%d "
                  "nccl-library=%d\n", c.nccl_headers, c.nccl_library);
  } else {
    out += "# spark-bench (nccl-tests 2.19.6 format) backend " + c.backend + " (" + c.note + ")\n";
  }
  out += "# Collective test starting: " + std::string(NcclTestsName(c.collective)) + "\n";
  bool by_factor = c.step_factor > 1;
  out += Printf("# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
                "iters: %d agg iters: 1 validation: %d graph: 0 unalign: 0\n",
                c.min_bytes, c.max_bytes, by_factor ? c.step_factor : c.step_bytes,
                by_factor ? "factor" : "bytes", c.warmup_iters, c.iters, c.check);
  out += "#\n# Using devices\n";
  for (const std::string& d : c.device_lines) out += "#" + d + "\n";
  out += "#\n";
  out += Printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
                "          \n", "", "", "", "", "");
  out += Printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size",
                "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
                "algbw", "busbw", "#wrong", 0, "");
  out += Printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)",
                "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                "(GB/s)", "", 0, "");
  return out;
}

std::string ReportRowLine(const ReportRow& r) {
  std::string root = Printf("%6i", r.root);
  return Printf("%12zu  %12zu  %8s  %6s  %6s", r.bytes, r.count, r.type.c_str(), r.redop.c_str(),
                root.c_str()) +
         Body(r.out_of_place) + Body(r.in_place) + "\n";
}

int64_t OutOfBounds(const std::vector<ReportRow>& rows) {
  int64_t n = 0;
  for (const ReportRow& r : rows) n += (r.out_of_place.wrong > 0) + (r.in_place.wrong > 0);
  return n;
}

double AverageBusBandwidth(const std::vector<ReportRow>& rows) {
  if (rows.empty()) return 0;
  double sum = 0;
  for (const ReportRow& r : rows) sum += r.out_of_place.bw.bus_gbps + r.in_place.bw.bus_gbps;
  return sum / (2.0 * rows.size());
}

std::string ReportFooter(const ReportConfig& c, const std::vector<ReportRow>& rows) {
  int64_t errors = OutOfBounds(rows);
  std::string out = Printf("# %-20s : %lld %s\n", "Out of bounds values",
                           static_cast<long long>(errors), errors ? "FAILED" : "OK");
  out += Printf("# %-20s : %g %s\n", "Avg bus bandwidth", AverageBusBandwidth(rows), "");
  out += "#\n# Collective test concluded: " + std::string(NcclTestsName(c.collective)) + "\n#\n\n";
  return out;
}

nlohmann::ordered_json ReportJson(const ReportConfig& c, const std::vector<ReportRow>& rows) {
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (const ReportRow& r : rows) {
    results.push_back({{"size", r.bytes}, {"count", r.count}, {"type", r.type},
                       {"redop", r.redop}, {"root", r.root},
                       {"out_of_place", GroupJson(r.out_of_place)},
                       {"in_place", GroupJson(r.in_place)}});
  }
  nlohmann::ordered_json devices = nlohmann::ordered_json::array();
  for (const std::string& d : c.device_lines) devices.push_back(std::string(Trim(d)));
  int64_t errors = OutOfBounds(rows);
  return {{"schema", "sparkctl-bench-collective/v1"},
          {"collective", CollectiveName(c.collective)},
          {"nccl_tests_name", NcclTestsName(c.collective)},
          {"backend", c.backend},
          {"ranks", c.ranks},
          {"config", {{"minimum_bytes", c.min_bytes}, {"maximum_bytes", c.max_bytes},
                      {"step_factor", c.step_factor}, {"step_bytes", c.step_bytes},
                      {"warmup_iters", c.warmup_iters}, {"iterations", c.iters},
                      {"validation", c.check}}},
          {"devices", devices},
          {"results", results},
          {"out_of_bounds", {{"count", errors}, {"okay", errors == 0}}},
          {"average_bus_bandwidth", AverageBusBandwidth(rows)}};
}

}  // namespace spark::bench
