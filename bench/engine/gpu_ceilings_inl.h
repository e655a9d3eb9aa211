// MedianMs (gpu_ceilings.h), a template.
#pragma once

#include <algorithm>
#include <vector>

#include "bench/engine/decode_bench_check.h"

namespace spark::engine::bench {

template <typename Fn>
double MedianMs(cudaStream_t stream, int iters, Fn&& fn) {
  cudaEvent_t a, b;
  Cuda(cudaEventCreate(&a), "event");
  Cuda(cudaEventCreate(&b), "event");
  fn();
  Cuda(cudaStreamSynchronize(stream), "sync");
  std::vector<float> ms;
  for (int rep = 0; rep < 5; ++rep) {
    Cuda(cudaEventRecord(a, stream), "record");
    for (int i = 0; i < iters; ++i) fn();
    Cuda(cudaEventRecord(b, stream), "record");
    Cuda(cudaEventSynchronize(b), "sync");
    float t = 0;
    Cuda(cudaEventElapsedTime(&t, a, b), "elapsed");
    ms.push_back(t / iters);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[2];
}

}  // namespace spark::engine::bench
