// A live progress display for long hashing runs, on stderr (never stdout: --json keeps stdout
// pure). On a TTY it redraws one line (about 5 times a second); otherwise it prints a full line
// every `line_interval` so logs of `ssh node sparkctl ...` stay readable.
//
// Line: "verify: 12.3 GiB / 476.0 GiB (2.6%)  3.1 GiB/s  ETA 2m13s  files 3/48".
// Thread-safety: the meter owns one background thread that reads the HashProgress atomics;
// construct and Finish() from one thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "sparkctl/weights/parallel_hash.h"

namespace spark::weights {

struct ProgressOptions {
  bool enabled = true;
  std::FILE* out = stderr;
  // Default: whether `out` is a terminal (isatty).
  std::optional<bool> tty;
  std::chrono::milliseconds tty_interval{200};
  std::chrono::milliseconds line_interval{std::chrono::seconds(10)};
};

// "label: 1.00 GiB / 4.00 GiB (25.0%)  512 MiB/s  ETA 6s  files 1/4".
std::string FormatProgressLine(const std::string& label, uint64_t done, uint64_t total,
                               uint64_t files_done, uint64_t files_total, double elapsed_seconds);

// "1h02m", "2m13s", "9s".
std::string FormatDuration(double seconds);

class ProgressMeter {
 public:
  // Starts displaying `progress` against the totals. Nothing is shown when !options.enabled.
  ProgressMeter(std::string label, uint64_t total_bytes, uint64_t total_files,
                const HashProgress& progress, ProgressOptions options);
  ~ProgressMeter();  // Finish()
  ProgressMeter(const ProgressMeter&) = delete;
  ProgressMeter& operator=(const ProgressMeter&) = delete;

  // Stops the thread and prints the final line (ending the TTY line with a newline).
  void Finish();

 private:
  void Run();
  void Print(bool final_line);

  std::string label_;
  uint64_t total_bytes_, total_files_;
  const HashProgress& progress_;
  ProgressOptions options_;
  bool tty_ = false;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool finished_ = false;
  std::thread thread_;
};

}  // namespace spark::weights
