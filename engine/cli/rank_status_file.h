// RankStatus: where one engine rank is in its life, for the supervisor (`sparkctl up` reads it
// over SSH to show per-rank progress) and for the rank's log. Each change of phase is logged
// (logger "engine.rank") and, when a path is given (`serve --status-file PATH`), written to PATH
// as one JSON object, replaced atomically (a temporary file in the same directory, then rename):
//
//   {"rank":1,"world_size":2,"pid":4242,"phase":"loading","progress":0.42,
//    "message":"reading weights","updated":"2026-11-29T22:10:05.123Z",
//    "steps":0,"tokens":0,"busy":false,"progressed":"2026-11-29T22:10:05.123Z",
//    "memory":{"available_bytes":125829120000,"guard":"ok","resident_bytes":...,
//              "peak_resident_bytes":...,"baseline_resident_bytes":...}}
//
// phase: starting | connecting | loading | warming | ready | failed | stopped. progress: 0 while
// starting and connecting, the fraction of this rank's weight bytes read while loading, 1 once
// loaded; failed and stopped keep the last value. Liveness: steps and tokens this rank has run,
// whether a step is running now (busy), and when the counters last advanced (progressed); a
// ticker rewrites the file every second while ready, from its own thread, so a supervisor tells
// "busy and progressing" (fresh file, counters moving) from "hung" (busy, counters still) and a
// frozen process (stale file). memory: this node's available bytes at the last reading, on
// rank 0 the memory guard's state (memory_guard.h), and the process's resident memory now, at
// its peak and just before the weights were loaded (what the memory plan is checked against).
// docs/engine.md documents the shape.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <thread>
#include <mutex>
#include <string>
#include <string_view>
#include <sys/types.h>

#include "base/status.h"

namespace spark::engine::cli {

enum class RankPhase { kStarting, kConnecting, kLoading, kWarming, kReady, kFailed, kStopped };

// "starting", "connecting", ...: the names used in the file.
std::string_view RankPhaseName(RankPhase phase);

struct RankStatusRecord {
  int rank = 0;
  int world_size = 1;
  pid_t pid = 0;
  RankPhase phase = RankPhase::kStarting;
  double progress = 0.0;
  std::string message;
  std::chrono::system_clock::time_point updated;
  uint64_t steps = 0;   // plans with entries run by this rank
  uint64_t tokens = 0;  // tokens those plans ran (prefill chunks and decode tokens)
  bool busy = false;    // inside a step now
  std::chrono::system_clock::time_point progressed;  // when steps last advanced (or started)
  int64_t memory_available_bytes = -1;  // -1: not read
  std::string memory_guard;             // "" on ranks without the guard
  int64_t resident_bytes = -1;           // VmRSS; -1: not read
  int64_t peak_resident_bytes = -1;      // VmHWM
  int64_t baseline_resident_bytes = -1;  // VmRSS before the weights were loaded
};

// What the ticker samples for the "memory" object (-1: unknown, "": no guard).
struct RankMemoryReport {
  int64_t available_bytes = -1;
  std::string guard;
  int64_t resident_bytes = -1;
  int64_t peak_resident_bytes = -1;
  int64_t baseline_resident_bytes = -1;
};

// The record as the file holds it (one JSON object, no newline inside, "updated" in ISO-8601
// UTC with milliseconds).
std::string RankStatusJson(const RankStatusRecord& record);

// Writes `text` to `path` atomically: PATH.tmp.<pid>, then rename over PATH. Unavailable naming
// the path and the OS error.
Status WriteFileAtomically(const std::string& path, const std::string& text);

class RankStatus {
 public:
  // `path` empty: phases are only logged.
  RankStatus(int rank, int world_size, std::string path);

  // Enters `phase` with `message`, logs it and rewrites the file. The file's write error, if
  // any (also logged as a warning: a supervisor's view must not stop the engine).
  Status Set(RankPhase phase, std::string message);
  // While loading: the fraction of weight bytes read. Rewrites the file when the value moved by
  // at least 1% or 250 ms passed since the last write, so big checkpoints do not flood the disk.
  void SetProgress(double fraction);
  // While ready: refreshes "updated" (rewriting the file at most once a second), called by the
  // rank's loop on every plan and heartbeat, so a supervisor tells a live rank from a hung one
  // by the age of "updated".
  void Touch();
  // Around each step with entries: the counters and the busy flag (no file write: the ticker
  // writes).
  void StepStarted(int64_t tokens);
  void StepFinished();
  void SetMemory(const RankMemoryReport& report);
  // Rewrites the file every `period` while ready, from a thread of its own, first calling
  // `sample` (may be empty) to refresh the memory fields. Stops when the object is destroyed
  // or StopTicker is called. Once only.
  void StartTicker(std::chrono::milliseconds period, std::function<void()> sample);
  void StopTicker();
  ~RankStatus();

  RankPhase phase() const;
  RankStatusRecord record() const;
  const std::string& path() const { return path_; }

 private:
  Status WriteLocked();

  const std::string path_;
  mutable std::mutex mu_;
  RankStatusRecord record_;
  double written_progress_ = 0.0;
  std::chrono::steady_clock::time_point written_at_;
  int logged_decile_ = 0;
  std::thread ticker_;
  std::condition_variable ticker_cv_;
  bool ticker_stop_ = false;
};

}  // namespace spark::engine::cli
