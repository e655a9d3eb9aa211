#include "sparkctl/weights/progress.h"

#include <unistd.h>

#include <cmath>

#include "base/strings.h"

namespace spark::weights {

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = static_cast<uint64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof(buf), "%lluh%02llum", (unsigned long long)(s / 3600),
                               (unsigned long long)(s % 3600 / 60));
  else if (s >= 60) std::snprintf(buf, sizeof(buf), "%llum%02llus", (unsigned long long)(s / 60),
                                  (unsigned long long)(s % 60));
  else std::snprintf(buf, sizeof(buf), "%llus", (unsigned long long)s);
  return buf;
}

std::string FormatProgressLine(const std::string& label, uint64_t done, uint64_t total,
                               uint64_t files_done, uint64_t files_total, double elapsed_seconds) {
  double percent = total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0;
  double rate = elapsed_seconds > 0 ? static_cast<double>(done) / elapsed_seconds : 0;
  std::string eta = rate > 0 ? FormatDuration(static_cast<double>(total - std::min(done, total)) / rate)
                             : "?";
  char pct[16];
  std::snprintf(pct, sizeof(pct), "%.1f%%", percent);
  return label + ": " + HumanBytes(done) + " / " + HumanBytes(total) + " (" + pct + ")  " +
         HumanBytes(static_cast<uint64_t>(rate)) + "/s  ETA " + eta + "  files " +
         std::to_string(files_done) + "/" + std::to_string(files_total);
}

ProgressMeter::ProgressMeter(std::string label, uint64_t total_bytes, uint64_t total_files,
                             const HashProgress& progress, ProgressOptions options)
    : label_(std::move(label)),
      total_bytes_(total_bytes),
      total_files_(total_files),
      progress_(progress),
      options_(options),
      start_(std::chrono::steady_clock::now()) {
  if (!options_.enabled || options_.out == nullptr) {
    finished_ = true;
    return;
  }
  tty_ = options_.tty.value_or(::isatty(::fileno(options_.out)) == 1);
  thread_ = std::thread([this] { Run(); });
}

ProgressMeter::~ProgressMeter() { Finish(); }

void ProgressMeter::Finish() {
  if (finished_) return;
  finished_ = true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  Print(true);
}

void ProgressMeter::Run() {
  auto interval = tty_ ? options_.tty_interval : options_.line_interval;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, interval, [this] { return stop_; })) Print(false);
}

void ProgressMeter::Print(bool final_line) {
  double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string line = FormatProgressLine(label_, progress_.bytes_done.load(), total_bytes_,
                                        progress_.files_done.load(), total_files_, elapsed);
  if (tty_) {
    // \r + clear-to-end redraws the same line.
    std::fprintf(options_.out, "\r%s\033[K%s", line.c_str(), final_line ? "\n" : "");
  } else {
    std::fprintf(options_.out, "%s\n", line.c_str());
  }
  std::fflush(options_.out);
}

}  // namespace spark::weights
