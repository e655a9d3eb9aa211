// GraphSteps: the decode steps a CudaBackend runs as CUDA graphs, and the steps it launches
// ahead of the host.
//
// A step opens with Begin(key, table_blocks). The first step of a key captures everything the
// model enqueues; later steps with that key run the model's op calls for their host side only
// (each op stages its host inputs at the same staging offsets and launches nothing: launching()
// is false) and the captured graph replays with them. The step ends at Launch (the backend's
// Download or DownloadLater): capture is closed and instantiated the first time, the graph is
// launched with its one output copied into a pinned host area, and Finish waits for it. A key
// must mean one op sequence: a replay whose host pass differs from its capture (op count,
// staged bytes, arena use, output size) is refused, not launched. Two steps may be in flight
// (Backend::kMaxDownloadsLater), each with its own host areas (parity) for inputs and output.
// With time_steps, each step's GPU time and the host gap before it are measured with events.
// Thread-safety: one thread at a time (the backend's).
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace spark::engine::backend::cuda {

class GraphSteps {
 public:
  // Sums of the graph steps timed so far. gpu_ms: from the step's first work on the stream
  // (enqueued once the host has staged the step) to the graph's end. gap_ms: from the end of
  // the graph step before to that first work, where the GPU waits for the host; counted only
  // between consecutive graph steps.
  struct Times {
    int64_t steps = 0, gaps = 0;
    double gpu_ms = 0, gap_ms = 0;
  };
  // What a replay must repeat of its capture's host pass.
  struct HostPass {
    int64_t ops = 0;
    size_t staged = 0;
    std::pair<size_t, size_t> arena;
  };
  // A launched step: its host areas (parity), its timing slot (-1: untimed), whether the step
  // before it was a graph step with no eager work between, and its output (bytes; for an eager
  // DownloadLater, the values downloaded already).
  struct Launched {
    int parity = 0;
    int timed_slot = -1;
    bool after_graph = false;
    size_t bytes = 0;
    std::optional<std::vector<float>> ready;
  };

  explicit GraphSteps(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  ~GraphSteps();
  GraphSteps(const GraphSteps&) = delete;
  GraphSteps& operator=(const GraphSteps&) = delete;

  // The stream the steps run on, events and the pinned output areas. Internal on CUDA errors.
  Status Init(cudaStream_t stream, bool time_steps);

  bool in_graph() const { return mode_ != Mode::kEager; }
  // False in a replay's host-only pass (its work is in the graph).
  bool launching() const { return mode_ != Mode::kReplay; }
  bool capturing() const { return mode_ == Mode::kCapture; }
  // The host staging area this step writes: its parity in a graph step, area 0 when eager.
  int area() const { return in_graph() ? parity_ : 0; }
  const std::string& key() const { return key_; }
  int table_blocks() const { return table_blocks_; }
  size_t count() const { return graphs_.size(); }
  bool launched_any() const { return !launched_.empty(); }
  size_t launched_count() const { return launched_.size(); }
  const Times& times() const { return times_; }
  void ResetTimes() { times_ = {}; }

  // Called by every op: counts a graph step's ops, notes eager work between graph steps.
  void NoteOp() {
    if (mode_ == Mode::kEager) eager_since_graph_ = true;
    if (in_graph()) ++ops_;
  }
  // Whether eager work ran since the last graph launch (or nothing ran at all).
  bool eager_since_graph() const { return eager_since_graph_; }
  // FailedPrecondition inside a step or with kMaxDownloadsLater steps in flight; InvalidArgument
  // for table_blocks <= 0.
  Status CheckCanBegin(int table_blocks) const;
  // Whether Begin must wait for the stream first: eager work ran since the last launch, or
  // nothing is in flight (graph steps in flight copy from the other host area and order
  // themselves on the stream).
  bool NeedsSync(bool eager_since) const { return launched_.empty() || eager_since; }
  // Opens a step under `key` (capture, or replay when captured before); the caller has synced
  // as NeedsSync says and rewound staging and arena.
  Status Begin(const std::string& key, int table_blocks, bool eager_since);
  // Abandons a step before its launch (nothing of it runs).
  void Cancel();
  // Ends the step: captures and instantiates it the first time (with its output copy of
  // `bytes` at `src`), checks the host pass against the capture, and launches it. `status` is
  // the backend's first error (a capture that met one is not kept).
  Result<Launched> Launch(const float* src, size_t bytes, const Status& status,
                          const HostPass& pass);
  // Waits for a launched step (DeadlineExceeded after the timeout) and copies its output.
  Status Finish(const Launched& step, std::span<float> host);
  // The queue of steps DownloadLater launched.
  void Push(Launched step) { launched_.push_back(std::move(step)); }
  Launched Pop();
  const Launched& front() const { return launched_.front(); }
  // Destroys every captured graph (their staging copies read areas about to be replaced).
  void DropAll();

 private:
  enum class Mode { kEager, kCapture, kReplay };
  struct Captured {
    cudaGraphExec_t exec = nullptr;
    size_t out_bytes = 0;
    HostPass pass;
  };
  static constexpr int kTimedSlots = 3;  // two steps in flight and the end of the one before
  Status AddTime(int slot, bool after_graph);
  Status Wait(cudaEvent_t event) const;

  cudaStream_t stream_ = nullptr;
  std::chrono::milliseconds timeout_;
  Mode mode_ = Mode::kEager;
  std::string key_;
  int table_blocks_ = 0;
  int parity_ = 0;
  int64_t ops_ = 0;
  bool eager_since_graph_ = true;
  std::map<std::string, Captured> graphs_;
  char* out_host_ = nullptr;  // pinned, two areas of out_bytes_
  size_t out_bytes_ = 0;
  std::deque<Launched> launched_;
  cudaEvent_t step_done_[2] = {nullptr, nullptr};  // the last step of each parity ended
  bool time_steps_ = false;
  int64_t steps_launched_ = 0;
  cudaEvent_t step_begin_[kTimedSlots] = {}, step_end_[kTimedSlots] = {};
  Times times_;
};

}  // namespace spark::engine::backend::cuda
