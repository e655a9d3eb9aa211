// ConstraintMasks: the token masks of one step's constrained sequences, computed on worker
// threads while the model's forward runs, so that structured output costs the step only what
// the forward does not hide. Start() hands over the rows (one per sequence that samples this
// step under an active grammar) and returns at once; Wait() returns when every row is filled.
// Rows are spread over the workers (ThreadPool's static partition), so a batch of 32 grammar
// requests costs about 32 / threads single-row fills.
// Thread-safety: Start and Wait from one thread (the engine's), alternately.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "engine/runtime/constrained_output.h"

namespace spark::engine::runtime {

class ConstraintMasks {
 public:
  // `threads` fill rows (>= 1); `vocab_size` sets the row length.
  ConstraintMasks(int threads, int vocab_size);
  ~ConstraintMasks();
  ConstraintMasks(const ConstraintMasks&) = delete;
  ConstraintMasks& operator=(const ConstraintMasks&) = delete;

  // Starts filling row i from rows[i] (the pointers must stay valid until Wait returns).
  void Start(std::vector<ConstrainedOutput*> rows);
  // Waits for the rows of the last Start; the first error of any row.
  Status Wait();
  // Row i of the last Start, valid until the next Start.
  std::span<const uint32_t> row(size_t i) const;
  // Seconds the last batch took on the workers (benchmarks).
  double last_fill_seconds() const { return last_fill_seconds_; }

 private:
  void Loop();

  const int words_;
  ThreadPool pool_;
  std::vector<uint32_t> masks_;
  std::vector<ConstrainedOutput*> rows_;
  std::vector<Status> errors_;
  double last_fill_seconds_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  bool pending_ = false;  // A batch was started and is not filled yet.
  bool stop_ = false;
  std::thread coordinator_;
};

}  // namespace spark::engine::runtime
