// nccl-tests' report format and arithmetic, so `sparkctl bench allreduce|allgather` prints what
// all_reduce_perf / all_gather_perf print and scripts that parse those outputs keep working:
//   - the size sweep of -b/-e/-f/-i (SizeSweep) and the byte/element conventions per collective
//     (CollectiveSizes: all-gather rounds each rank's share down to 16 bytes, its size column
//     is the gathered buffer and its count column the per-rank element count);
//   - algbw = bytes / time, busbw = algbw * 2(n-1)/n (all-reduce) or (n-1)/n (all-gather);
//   - the header, one line per size with out-of-place and in-place groups, and the footer with
//     `# Out of bounds values : N OK|FAILED` and `# Avg bus bandwidth    : X`;
//   - the same report as JSON (schema "sparkctl-bench-collective/v1").
// Pure: no I/O. Thread-safety: functions and values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace spark::bench {

enum class Collective { kAllReduce, kAllGather };

std::string_view CollectiveName(Collective c);  // "allreduce", "allgather"
std::string_view NcclTestsName(Collective c);   // "all_reduce_perf", "all_gather_perf"
// InvalidArgument listing the known names.
Result<Collective> ParseCollective(std::string_view name);

// "8" -> 8, "32K"/"32k" -> 32768, "1M", "1G" (binary multiples, as nccl-tests). InvalidArgument
// naming `flag` for anything else.
Result<size_t> ParseByteSize(std::string_view text, std::string_view flag);

// The sizes nccl-tests visits: min, then *factor (factor > 1) or +step_bytes, while <= max.
std::vector<size_t> SizeSweep(size_t min_bytes, size_t max_bytes, size_t factor, size_t step_bytes);

// Element counts of one test size (nccl-tests' GetCollByteCount).
struct CollectiveSizes {
  size_t send_count = 0;           // elements each rank sends
  size_t recv_count = 0;           // elements each rank receives
  size_t param_count = 0;          // the count passed to the collective (the "count" column)
  size_t send_inplace_offset = 0;  // in-place: send buffer = recv buffer + offset * rank
  size_t report_bytes = 0;         // the "size" column: max(send, recv) * elt_size
};
CollectiveSizes SizesFor(Collective c, size_t size_bytes, size_t elt_size, int nranks);

struct Bandwidth {
  double alg_gbps = 0;  // GB/s, 1e9 bytes
  double bus_gbps = 0;
};
// nccl-tests' GetBw: count is param_count.
Bandwidth ComputeBandwidth(Collective c, size_t count, size_t elt_size, double seconds, int nranks);

// nccl-tests' getFloatStr: the value in `width` characters with 2, 1 or 0 decimals, else in
// exponent notation.
std::string FormatFloat(double value, int width);

// What the header says about the run.
struct ReportConfig {
  Collective collective = Collective::kAllReduce;
  std::string backend;        // "nccl", "gloo" or "oneshot"
  int nccl_headers = 0;       // NCCL_VERSION_CODE; 0 for Gloo
  int nccl_library = 0;
  int ranks = 1;
  size_t min_bytes = 0, max_bytes = 0, step_factor = 1, step_bytes = 0;
  int warmup_iters = 1, iters = 20, check = 1;
  std::vector<std::string> device_lines;  // one per rank, without the leading "#"
  std::string note = "CPU ranks, TCP";    // what the header says about host backends
};

struct Measurement {
  double time_us = 0;
  Bandwidth bw;
  int64_t wrong = 0;  // wrong elements summed over ranks; -1 when not checked (prints N/A)
};

struct ReportRow {
  size_t bytes = 0;  // the size column
  size_t count = 0;  // the count column
  std::string type = "float";
  std::string redop;  // "sum", or "none" for all-gather
  int root = -1;
  Measurement out_of_place, in_place;
};

// One device line: "#  Rank  0 Group  0 Pid   4242 on     spark-0 device  0 [0000:1b:00] NAME".
std::string DeviceLine(int rank, int pid, const std::string& host, const std::string& device,
                       const std::string& what);

std::string ReportHeader(const ReportConfig& config);
std::string ReportRowLine(const ReportRow& row);
// Footer from all rows: errors = rows with wrong > 0 summed; avg busbw over every group.
std::string ReportFooter(const ReportConfig& config, const std::vector<ReportRow>& rows);
int64_t OutOfBounds(const std::vector<ReportRow>& rows);
double AverageBusBandwidth(const std::vector<ReportRow>& rows);
nlohmann::ordered_json ReportJson(const ReportConfig& config, const std::vector<ReportRow>& rows);

}  // namespace spark::bench
