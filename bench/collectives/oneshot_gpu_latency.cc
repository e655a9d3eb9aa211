// oneshot_gpu_latency: the one-shot transport's per-call latency for GPU tensors (the staged
// path: kernel, pinned-memory doorbell, progress thread, socket wire on loopback), ranks as
// threads of this process sharing GPU 0 (one context: their kernels run concurrently, which
// ranks as processes on one GPU do not). Each call is enqueued on the rank's stream and waited
// for; rank 0's per-call times give p50 and p99. Subtract oneshot_latency's figure (the same
// calls on host memory) to get what staging adds. Prints a table; --json FILE writes it
// (schema sparkctl-oneshot-gpu-latency/v1).
//   oneshot_gpu_latency --ranks 2 --sizes 4K,10K,64K --iters 2000
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench/collectives/latency_stats.h"
#include "comm/local_communicator.h"
#include "comm/oneshot_cuda/staged_group.h"

namespace {

using spark::comm::oneshot::StagedOneShot;
using Clock = std::chrono::steady_clock;

void Die(int rank, const std::string& what) {
  std::fprintf(stderr, "oneshot_gpu_latency: rank %d: %s\n", rank, what.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Per-call latency of the one-shot transport on GPU tensors (ranks share GPU 0)"};
  int ranks = 2, iters = 2000, warmup = 200;
  std::string topology = "mesh", sizes_text = "4K,10K,64K", json_path;
  app.add_option("--ranks", ranks, "Ranks (threads), default 2")->check(CLI::Range(2, 8));
  app.add_option("--topology", topology, "mesh (default), ring or line");
  app.add_option("--sizes", sizes_text, "Comma-separated sizes, default 4K,10K,64K");
  app.add_option("--iters", iters, "Timed calls per size, default 2000");
  app.add_option("--warmup", warmup, "Untimed calls per size, default 200");
  app.add_option("--json", json_path, "Write the results here");
  CLI11_PARSE(app, argc, argv);
  const std::vector<size_t> sizes = spark::bench::ParseSizes(sizes_text);
  spark::comm::oneshot::OneShotOptions o;
  auto topo = spark::comm::oneshot::ParseTopology(topology);
  if (!topo.ok()) Die(0, topo.status().message());
  o.topology = *topo;
  o.capacity_bytes = *std::max_element(sizes.begin(), sizes.end());
  o.addresses = {"127.0.0.1"};
  auto locals = spark::comm::CreateLocalGroup(ranks);
  std::vector<std::unique_ptr<StagedOneShot>> groups(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto g = StagedOneShot::Create(*locals[r], 0, o);
      if (!g.ok()) Die(r, g.status().message());
      groups[r] = std::move(*g);
    });
  }
  for (auto& t : threads) t.join();
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("# oneshot_gpu_latency: %d ranks sharing %s, %s, staged, socket wire on loopback\n",
              ranks, prop.name, topology.c_str());
  std::printf("%10s %10s %10s %10s\n", "bytes", "p50_us", "p99_us", "mean_us");
  nlohmann::json rows = nlohmann::json::array();
  for (size_t bytes : sizes) {
    std::vector<double> times;
    threads.clear();
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        cudaSetDevice(0);
        cudaStream_t stream;
        if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
          Die(r, "cudaStreamCreate");
        }
        float* d = nullptr;
        const size_t count = bytes / sizeof(float);
        if (cudaMalloc(&d, bytes) != cudaSuccess) Die(r, "cudaMalloc");
        cudaMemsetAsync(d, 0, bytes, stream);
        for (int i = 0; i < warmup + iters; ++i) {
          const auto t0 = Clock::now();
          if (auto s = groups[r]->EnqueueAllReduceSum(d, count, stream); !s.ok()) {
            Die(r, s.message());
          }
          if (cudaStreamSynchronize(stream) != cudaSuccess) {
            Die(r, "call " + std::to_string(i) + ": " + groups[r]->broken().message());
          }
          if (r == 0 && i >= warmup) {
            times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
          }
        }
        cudaFree(d);
        cudaStreamDestroy(stream);
      });
    }
    for (auto& t : threads) t.join();
    double mean = 0;
    for (double t : times) mean += t / times.size();
    const double p50 = spark::bench::Percentile(times, 0.5);
    const double p99 = spark::bench::Percentile(times, 0.99);
    std::printf("%10zu %10.1f %10.1f %10.1f\n", bytes, p50, p99, mean);
    rows.push_back({{"bytes", bytes}, {"p50_us", p50}, {"p99_us", p99}, {"mean_us", mean}});
  }
  if (!json_path.empty()) {
    nlohmann::json j = {{"schema", "sparkctl-oneshot-gpu-latency/v1"},
                        {"ranks", ranks},
                        {"gpu", prop.name},
                        {"topology", topology},
                        {"wire", "socket (loopback)"},
                        {"iters", iters},
                        {"rows", rows}};
    std::ofstream(json_path) << j.dump(2) << "\n";
  }
  return 0;
}
