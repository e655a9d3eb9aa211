#include "engine/cli/rank_status_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>

#include "base/logging.h"

namespace spark::engine::cli {
namespace {

std::string IsoUtc(std::chrono::system_clock::time_point t) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const time_t secs = static_cast<time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return buf;
}

Status WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, "write");
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

std::string_view RankPhaseName(RankPhase phase) {
  switch (phase) {
    case RankPhase::kStarting: return "starting";
    case RankPhase::kConnecting: return "connecting";
    case RankPhase::kLoading: return "loading";
    case RankPhase::kWarming: return "warming";
    case RankPhase::kReady: return "ready";
    case RankPhase::kFailed: return "failed";
    case RankPhase::kStopped: return "stopped";
  }
  return "unknown";
}

std::string RankStatusJson(const RankStatusRecord& r) {
  // Rounded so that the file shows 0.42, not 0.41999999999999998.
  const double progress = std::round(r.progress * 10000.0) / 10000.0;
  nlohmann::ordered_json j = {{"rank", r.rank},
                              {"world_size", r.world_size},
                              {"pid", static_cast<int64_t>(r.pid)},
                              {"phase", std::string(RankPhaseName(r.phase))},
                              {"progress", progress},
                              {"message", r.message},
                              {"updated", IsoUtc(r.updated)},
                              {"steps", r.steps},
                              {"tokens", r.tokens},
                              {"busy", r.busy},
                              {"progressed", IsoUtc(r.progressed)}};
  nlohmann::ordered_json m = nlohmann::ordered_json::object();
  if (r.memory_available_bytes >= 0) m["available_bytes"] = r.memory_available_bytes;
  if (!r.memory_guard.empty()) m["guard"] = r.memory_guard;
  if (r.resident_bytes >= 0) m["resident_bytes"] = r.resident_bytes;
  if (r.peak_resident_bytes >= 0) m["peak_resident_bytes"] = r.peak_resident_bytes;
  if (r.baseline_resident_bytes >= 0) m["baseline_resident_bytes"] = r.baseline_resident_bytes;
  if (!m.empty()) j["memory"] = m;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return UnavailableError("cannot write " + path + " (creating " + tmp +
                            "): " + std::strerror(errno));
  }
  Status s = WriteAll(fd, text + "\n");
  if (::close(fd) != 0 && s.ok()) s = ErrnoError(errno, "close");
  if (s.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    s = UnavailableError("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s.WithContext(path);
  }
  return Status::Ok();
}

RankStatus::RankStatus(int rank, int world_size, std::string path) : path_(std::move(path)) {
  record_.rank = rank;
  record_.world_size = world_size;
  record_.pid = getpid();
  record_.updated = record_.progressed = std::chrono::system_clock::now();
}

RankStatus::~RankStatus() { StopTicker(); }

void RankStatus::StepStarted(int64_t tokens) {
  std::lock_guard lock(mu_);
  record_.busy = true;
  record_.tokens += static_cast<uint64_t>(std::max<int64_t>(0, tokens));
  record_.progressed = std::chrono::system_clock::now();
}

void RankStatus::StepFinished() {
  std::lock_guard lock(mu_);
  record_.busy = false;
  ++record_.steps;
  record_.progressed = std::chrono::system_clock::now();
}

void RankStatus::SetMemory(const RankMemoryReport& report) {
  std::lock_guard lock(mu_);
  record_.memory_available_bytes = report.available_bytes;
  record_.memory_guard = report.guard;
  record_.resident_bytes = report.resident_bytes;
  record_.peak_resident_bytes = report.peak_resident_bytes;
  record_.baseline_resident_bytes = report.baseline_resident_bytes;
}

void RankStatus::StartTicker(std::chrono::milliseconds period, std::function<void()> sample) {
  std::lock_guard lock(mu_);
  if (ticker_.joinable()) return;
  ticker_ = std::thread([this, period, sample = std::move(sample)] {
    std::unique_lock lock(mu_);
    // The first sample comes as soon as the rank is ready, so that the status file never
    // shows a serving rank without its memory for a whole period.
    bool sampled = false;
    while (true) {
      ticker_cv_.wait_for(lock, period, [&] {
        return ticker_stop_ || (!sampled && record_.phase == RankPhase::kReady);
      });
      if (ticker_stop_) break;
      if (record_.phase != RankPhase::kReady) continue;
      sampled = true;
      lock.unlock();
      if (sample) sample();
      lock.lock();
      if (record_.phase == RankPhase::kReady) WriteLocked().IgnoreError();  // Logged inside.
    }
  });
}

void RankStatus::StopTicker() {
  {
    std::lock_guard lock(mu_);
    ticker_stop_ = true;
  }
  ticker_cv_.notify_all();
  if (ticker_.joinable() && ticker_.get_id() != std::this_thread::get_id()) ticker_.join();
}

Status RankStatus::Set(RankPhase phase, std::string message) {
  std::lock_guard lock(mu_);
  record_.phase = phase;
  record_.message = std::move(message);
  if (phase == RankPhase::kStarting || phase == RankPhase::kConnecting) record_.progress = 0.0;
  if (phase == RankPhase::kLoading) {
    record_.progress = 0.0;
    logged_decile_ = 0;
  }
  if (phase == RankPhase::kWarming || phase == RankPhase::kReady) record_.progress = 1.0;
  if (phase == RankPhase::kReady) ticker_cv_.notify_all();
  auto log = Logger("engine.rank");
  const auto level = phase == RankPhase::kFailed ? spdlog::level::err : spdlog::level::info;
  log->log(level, "rank {}/{} phase {}: {}", record_.rank, record_.world_size,
           RankPhaseName(phase), record_.message);
  return WriteLocked();
}

void RankStatus::SetProgress(double fraction) {
  std::lock_guard lock(mu_);
  if (record_.phase != RankPhase::kLoading) return;
  fraction = std::clamp(fraction, 0.0, 1.0);
  record_.progress = fraction;
  const int decile = static_cast<int>(fraction * 10.0);
  if (decile > logged_decile_) {
    logged_decile_ = decile;
    Logger("engine.rank")->info("rank {}/{} loading: {:.0f}% of its weights read", record_.rank,
                                record_.world_size, fraction * 100.0);
  }
  const auto now = std::chrono::steady_clock::now();
  if (fraction < 1.0 && fraction - written_progress_ < 0.01 &&
      now - written_at_ < std::chrono::milliseconds(250)) {
    return;
  }
  WriteLocked().IgnoreError();  // Logged inside; loading goes on.
}

void RankStatus::Touch() {
  std::lock_guard lock(mu_);
  if (record_.phase != RankPhase::kReady) return;
  if (std::chrono::steady_clock::now() - written_at_ < std::chrono::seconds(1)) return;
  WriteLocked().IgnoreError();  // Logged inside.
}

RankPhase RankStatus::phase() const {
  std::lock_guard lock(mu_);
  return record_.phase;
}

RankStatusRecord RankStatus::record() const {
  std::lock_guard lock(mu_);
  return record_;
}

Status RankStatus::WriteLocked() {
  record_.updated = std::chrono::system_clock::now();
  written_progress_ = record_.progress;
  written_at_ = std::chrono::steady_clock::now();
  if (path_.empty()) return Status::Ok();
  Status s = WriteFileAtomically(path_, RankStatusJson(record_));
  if (!s.ok()) Logger("engine.rank")->warn("status file: {}", s.message());
  return s;
}

}  // namespace spark::engine::cli
