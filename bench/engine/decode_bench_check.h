// Failure handling shared by spark-decode-bench's files: a failed step prints what failed and
// exits (the benchmark has nothing to fall back to).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "base/status.h"

namespace spark::engine::bench {

inline void Check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.message().c_str());
    std::exit(2);
  }
}

template <typename T>
T Take(Result<T> r, const char* what) {
  Check(r.status(), what);
  return std::move(r).value();
}

inline void Cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}

}  // namespace spark::engine::bench
