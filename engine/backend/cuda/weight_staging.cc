#include "engine/backend/cuda/weight_staging.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "kernels/cuda_check.h"
#include "kernels/elementwise.h"

namespace spark::engine::backend::cuda {
namespace {

int StagingThreads(int threads) {
  if (threads > 0) return threads;
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
}

}  // namespace

WeightStaging::WeightStaging(int threads) : pool_(StagingThreads(threads)) {}

WeightStaging::~WeightStaging() { Release(); }

Status WeightStaging::Allocate() {
  slots_.resize(kBuffers);
  for (Slot& s : slots_) {
    SPARK_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&s.host, kBufferBytes, cudaHostAllocDefault));
    SPARK_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
  }
  return Status::Ok();
}

void WeightStaging::Release() {
  for (Slot& s : slots_) {
    if (s.done) cudaEventSynchronize(s.done);
    if (s.host) cudaFreeHost(s.host);
    if (s.device) cudaFree(s.device);
    if (s.done) cudaEventDestroy(s.done);
  }
  slots_.clear();
  next_ = 0;
}

Status WeightStaging::Gather(const Backend::WeightBytes& src, size_t begin, size_t n,
                             uint8_t* out) {
  // Pieces of at least 1 MiB per thread: fewer and the threads cost more than they copy.
  constexpr int64_t kPiece = 1 << 20;
  const int64_t pieces = static_cast<int64_t>((n + kPiece - 1) / kPiece);
  std::atomic<int> read_error{0};
  pool_.ParallelFor(pieces, 1, [&](int64_t first, int64_t last) {
    size_t at = begin + first * kPiece;
    const size_t end = begin + std::min<size_t>(n, last * kPiece);
    while (at < end) {
      const size_t row = at / src.row_bytes, col = at % src.row_bytes;
      const size_t len = std::min(end - at, src.row_bytes - col);
      const size_t from = row * src.src_stride + col;
      if (src.fd < 0) {
        std::memcpy(out + (at - begin), src.src + from, len);
      } else {
        for (size_t done = 0; done < len;) {
          const ssize_t got = ::pread(src.fd, out + (at - begin) + done, len - done,
                                      static_cast<off_t>(src.file_offset + from + done));
          if (got <= 0) {
            read_error = got == 0 ? EIO : errno;
            return;
          }
          done += static_cast<size_t>(got);
        }
      }
      at += len;
    }
  });
  if (read_error != 0) {
    return DataLossError(std::string("reading weights: ") + std::strerror(read_error));
  }
  return Status::Ok();
}

Status WeightStaging::Copy(const Backend::WeightBytes& src, uint8_t* dst, cudaStream_t stream) {
  if (src.size() == 0) return Status::Ok();
  if (slots_.empty()) SPARK_RETURN_IF_ERROR(Allocate());
  Backend::WeightBytes run = src;
  if (run.rows == 1) run.src_stride = run.row_bytes;
  for (size_t at = 0; at < run.size(); at += kBufferBytes) {
    Slot& slot = slots_[next_];
    next_ = (next_ + 1) % kBuffers;
    if (slot.in_flight) SPARK_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(slot.done));
    const size_t n = std::min(kBufferBytes, run.size() - at);
    SPARK_RETURN_IF_ERROR(Gather(run, at, n, slot.host));
    if (src.widen_bf16) {
      if (slot.device == nullptr) {
        SPARK_CUDA_RETURN_IF_ERROR(cudaMalloc(&slot.device, kBufferBytes));
      }
      SPARK_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(slot.device, slot.host, n, cudaMemcpyHostToDevice, stream));
      SPARK_RETURN_IF_ERROR(kernels::CastBf16ToF32(static_cast<const __nv_bfloat16*>(slot.device),
                                                   n / 2, reinterpret_cast<float*>(dst + 2 * at),
                                                   stream));
    } else {
      SPARK_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(dst + at, slot.host, n, cudaMemcpyHostToDevice, stream));
    }
    SPARK_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.done, stream));
    slot.in_flight = true;
  }
  return Status::Ok();
}

Status WeightStaging::Finish(cudaStream_t stream) {
  if (slots_.empty()) return Status::Ok();
  SPARK_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  for (Slot& s : slots_) s.in_flight = false;
  return Status::Ok();
}

}  // namespace spark::engine::backend::cuda
