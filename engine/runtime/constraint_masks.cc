#include "engine/runtime/constraint_masks.h"

#include <chrono>

namespace spark::engine::runtime {

ConstraintMasks::ConstraintMasks(int threads, int vocab_size)
    : words_(MaskWords(vocab_size)), pool_(std::max(1, threads)) {
  coordinator_ = std::thread([this] { Loop(); });
}

ConstraintMasks::~ConstraintMasks() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  coordinator_.join();
}

void ConstraintMasks::Start(std::vector<ConstrainedOutput*> rows) {
  std::lock_guard lock(mu_);
  rows_ = std::move(rows);
  masks_.assign(rows_.size() * words_, 0);
  errors_.assign(rows_.size(), Status::Ok());
  pending_ = !rows_.empty();
  if (pending_) cv_.notify_all();
}

Status ConstraintMasks::Wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return !pending_; });
  for (const Status& s : errors_) {
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

std::span<const uint32_t> ConstraintMasks::row(size_t i) const {
  return {masks_.data() + i * words_, static_cast<size_t>(words_)};
}

void ConstraintMasks::Loop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || pending_; });
    if (stop_) return;
    lock.unlock();  // Start/Wait do not touch the rows while pending_.
    const auto start = std::chrono::steady_clock::now();
    pool_.ParallelFor(static_cast<int64_t>(rows_.size()), 1, [this](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        std::span<uint32_t> mask(masks_.data() + i * words_, static_cast<size_t>(words_));
        errors_[i] = rows_[i]->FillMask(mask);
      }
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    lock.lock();
    last_fill_seconds_ = seconds;
    pending_ = false;
    cv_.notify_all();
  }
}

}  // namespace spark::engine::runtime
