// See peer_bench.h.
#include "bench/kernels/peer_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/norm.h"
#include "kernels/peer_all_reduce.h"

namespace spark::kernels {
namespace detail {
bool DependentLaunchEnabled();  // kernels/launch.cuh
}  // namespace detail
namespace {

constexpr int kWorld = 2;

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "peer bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}

void Check(const Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "peer bench: %s\n", s.message().c_str());
    std::exit(2);
  }
}

struct Rank {
  int device = 0;
  cudaStream_t stream = nullptr;
  void* region = nullptr;
  uint64_t* epochs = nullptr;
  float *delta = nullptr, *h = nullptr, *w = nullptr, *out = nullptr;
  PeerAllReduceArgs args;
  cudaGraphExec_t graphs[2] = {};  // two kernels, fused
};

float* Filled(size_t n, float v) {
  std::vector<float> host(n, v);
  float* d = nullptr;
  Check(cudaMalloc(&d, n * sizeof(float)), "cudaMalloc");
  Check(cudaMemcpy(d, host.data(), n * sizeof(float), cudaMemcpyHostToDevice), "upload");
  return d;
}

}  // namespace

PeerTimes TimePeerAllReduceNorm(int rows, int dim, int calls, PeerProtocol protocol) {
  PeerTimes t;
  const int devices = CudaDeviceCount();
  t.one_device = devices < kWorld;
  if (t.one_device && detail::DependentLaunchEnabled()) {
    // Both ranks' graphs, each a chain of dependent launches, stalled every time on one H200:
    // rank 1's all-reduce never ran while rank 0's waited for it (the kernel trapped after its
    // timeout). Ranks on their own GPUs run with dependent launch.
    std::fprintf(stderr,
                 "peer bench: two ranks on one GPU need SPARK_PDL=0 (with dependent launch their "
                 "graphs stall each other); rerun as SPARK_PDL=0 spark-kernel-bench --only peer\n");
    std::exit(2);
  }
  const size_t n = size_t(rows) * dim;
  std::vector<Rank> ranks(kWorld);
  for (int r = 0; r < kWorld; ++r) {
    Rank& k = ranks[r];
    k.device = t.one_device ? 0 : r;
    Check(cudaSetDevice(k.device), "cudaSetDevice");
    if (!t.one_device) {
      const cudaError_t e = cudaDeviceEnablePeerAccess(1 - r, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) Check(e, "peer access");
      cudaGetLastError();
    }
    Check(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking), "stream");
    Check(cudaMalloc(&k.region, PeerRegionBytes(n, kWorld)), "cudaMalloc");
    Check(PeerRegionInit(k.region, n, kWorld));
    Check(cudaMalloc(reinterpret_cast<void**>(&k.epochs), kPeerEpochBytes), "cudaMalloc");
    Check(cudaMemset(k.epochs, 0, kPeerEpochBytes), "cudaMemset");
    // Zero deltas keep every value finite over any number of calls (the sum is written back).
    k.delta = Filled(n, 0.0f);
    k.h = Filled(n, 1.0f);
    k.w = Filled(dim, 1.0f);
    k.out = Filled(n, 0.0f);
  }
  for (int r = 0; r < kWorld; ++r) {
    PeerAllReduceArgs& a = ranks[r].args;
    for (int p = 0; p < kWorld; ++p) a.regions[p] = ranks[p].region;
    a.epochs = ranks[r].epochs;
    a.rank = r;
    a.world = kWorld;
    a.capacity = n;
    a.timeout_ns = 10'000'000'000ull;
    a.protocol = protocol;
  }
  for (Rank& k : ranks) {
    Check(cudaSetDevice(k.device), "cudaSetDevice");
    for (int fused = 0; fused < 2; ++fused) {
      cudaGraph_t graph;
      Check(cudaStreamBeginCapture(k.stream, cudaStreamCaptureModeRelaxed), "capture");
      for (int c = 0; c < calls; ++c) {
        if (fused) {
          Check(PeerAllReduceAddRmsNorm(k.args, k.delta, rows, dim, k.h, k.w, 1e-6f, k.out, nullptr,
                                        k.stream));
        } else {
          Check(PeerAllReduceSum(k.args, k.delta, n, k.stream));
          Check(RmsNorm<float>(k.delta, k.h, k.w, rows, dim, 1e-6f, k.out, k.stream));
        }
      }
      Check(cudaStreamEndCapture(k.stream, &graph), "end capture");
      Check(cudaGraphInstantiate(&k.graphs[fused], graph, 0), "instantiate");
      cudaGraphDestroy(graph);
    }
  }
  auto launch_all = [&](int fused) {
    const auto start = std::chrono::steady_clock::now();
    for (Rank& k : ranks) {
      Check(cudaSetDevice(k.device), "cudaSetDevice");
      Check(cudaGraphLaunch(k.graphs[fused], k.stream), "graph launch");
    }
    for (Rank& k : ranks) {
      Check(cudaSetDevice(k.device), "cudaSetDevice");
      Check(cudaStreamSynchronize(k.stream), "graph run");
    }
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
        .count();
  };
  for (int fused = 0; fused < 2; ++fused) {
    for (int i = 0; i < 3; ++i) launch_all(fused);  // warm-up
  }
  std::vector<double> runs[2];
  for (int rep = 0; rep < 20; ++rep) {
    for (int fused = 0; fused < 2; ++fused) runs[fused].push_back(launch_all(fused) / calls);
  }
  for (auto& v : runs) std::sort(v.begin(), v.end());
  t.two_kernels_us = runs[0][runs[0].size() / 2];
  t.fused_us = runs[1][runs[1].size() / 2];
  for (Rank& k : ranks) {
    cudaSetDevice(k.device);
    for (cudaGraphExec_t g : k.graphs) cudaGraphExecDestroy(g);
    for (void* p : {k.region, static_cast<void*>(k.epochs), static_cast<void*>(k.delta),
                    static_cast<void*>(k.h), static_cast<void*>(k.w), static_cast<void*>(k.out)}) {
      cudaFree(p);
    }
    cudaStreamDestroy(k.stream);
  }
  cudaSetDevice(0);
  return t;
}

}  // namespace spark::kernels
