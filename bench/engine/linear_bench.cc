// linear_bench: GFLOP/s of the CPU backend's Linear (out = x * w^T, fp32) on decode, small-batch
// and prefill shapes, next to the plain one-output-at-a-time Dot loop it replaced and next to a
// simple measured peak: independent 8-float multiply and add chains held in registers, on every
// thread at once (the same vector type and no FMA, as the kernel uses). Also checks that the
// blocked kernel's outputs equal Dot's bit for bit. With one thread (the default) times are
// this thread's CPU time, so the numbers hold on a busy machine; with --threads N they are wall
// time. See NOTES.md.
//
//   linear_bench [--threads 1] [--min-seconds 0.5] [--json out.json]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend/cpu/cpu_backend.h"
#include "base/thread_pool.h"

namespace {

using Clock = std::chrono::steady_clock;
using spark::engine::backend::cpu::CpuBackend;
using spark::engine::backend::cpu::Dot;
using spark::ThreadPool;

typedef float V8 __attribute__((vector_size(32)));

struct Options {
  int threads = 1;
  double min_seconds = 0.5;
  std::string json_out;
};

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string("0"); };
    if (a == "--threads") o.threads = std::max(1, std::stoi(next()));
    else if (a == "--min-seconds") o.min_seconds = std::stod(next());
    else if (a == "--json") o.json_out = next();
  }
  return o;
}

// CPU time of this thread (one thread), or wall time (several).
double Now(bool cpu_time) {
  if (!cpu_time) return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Runs fn until min_seconds have passed; seconds per call.
template <typename Fn>
double TimePerCall(double min_seconds, bool cpu_time, Fn&& fn) {
  fn();  // Warm caches and the pool.
  int calls = 0;
  const double start = Now(cpu_time);
  double elapsed = 0;
  do {
    fn();
    ++calls;
    elapsed = Now(cpu_time) - start;
  } while (elapsed < min_seconds);
  return elapsed / calls;
}

// Measured peak of one thread: 6 independent multiply chains (acc = acc * m) and 6 independent
// add chains (acc = acc + a) over 8 floats, interleaved: enough independent work to keep every
// multiply and add unit busy (one flop per lane per operation, no FMA, as in the kernel), built
// for the same targets as the kernel (cpu_gemm.cc).
#if defined(__x86_64__)
__attribute__((target_clones("avx2", "default")))
#endif
double PeakOneThread(double seconds, bool cpu_time, float* sink) {
  // Named variables, not arrays: GCC keeps these in registers.
  const V8 one = {1, 1, 1, 1, 1, 1, 1, 1};
  V8 m0 = one * 1.001f, m1 = one * 1.002f, m2 = one * 1.003f, m3 = one * 1.004f,
     m4 = one * 1.005f, m5 = one * 1.006f;
  V8 a0 = one * 0.1f, a1 = one * 0.2f, a2 = one * 0.3f, a3 = one * 0.4f, a4 = one * 0.5f,
     a5 = one * 0.6f;
  const V8 m = one * 0.999999f;
  const V8 a = one * 1e-7f;
  int64_t steps = 0;
  const double start = Now(cpu_time);
  double elapsed = 0;
  do {
    for (int i = 0; i < 4096; ++i) {
      m0 = m0 * m;
      a0 = a0 + a;
      m1 = m1 * m;
      a1 = a1 + a;
      m2 = m2 * m;
      a2 = a2 + a;
      m3 = m3 * m;
      a3 = a3 + a;
      m4 = m4 * m;
      a4 = a4 + a;
      m5 = m5 * m;
      a5 = a5 + a;
    }
    steps += 4096;
    elapsed = Now(cpu_time) - start;
  } while (elapsed < seconds);
  const V8 all = ((m0 + m1) + (m2 + m3)) + ((m4 + m5) + (a0 + a1)) + ((a2 + a3) + (a4 + a5));
  float s = 0;  // Every lane is used, so none of the work can be dropped.
  for (int j = 0; j < 8; ++j) s += all[j];
  *sink = s;
  return static_cast<double>(steps) * 12 * 8 / elapsed / 1e9;
}

double PeakAllThreads(int threads, double seconds) {
  std::vector<double> gflops(threads);
  std::vector<float> sinks(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] { gflops[t] = PeakOneThread(seconds, threads == 1, &sinks[t]); });
  }
  for (auto& th : pool) th.join();
  double total = 0;
  for (double g : gflops) total += g;
  return total;
}

// The Linear this kernel replaced: one Dot per output, weight rows tiled over threads.
void DotLinear(ThreadPool& pool, const float* x, int64_t rows, int in, const float* w, int out_f,
               float* out) {
  constexpr int kRowTile = 16;
  const int64_t tiles = (out_f + kRowTile - 1) / kRowTile;
  pool.ParallelFor(tiles, 1, [&](int64_t b, int64_t e) {
    for (int64_t tile = b; tile < e; ++tile) {
      const int o0 = static_cast<int>(tile * kRowTile);
      const int o1 = std::min(out_f, o0 + kRowTile);
      for (int64_t r = 0; r < rows; ++r) {
        for (int o = o0; o < o1; ++o) {
          out[r * out_f + o] = Dot(x + r * in, w + static_cast<int64_t>(o) * in, in);
        }
      }
    }
  });
}

struct Shape {
  const char* name;
  int64_t rows;
  int in;
  int out;
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseArgs(argc, argv);
  const Shape shapes[] = {
      {"decode qkv 1x1024->3072", 1, 1024, 3072},   {"decode mlp 1x4096->4096", 1, 4096, 4096},
      {"batch 16x1024->3072", 16, 1024, 3072},      {"prefill 128x1024->3072", 128, 1024, 3072},
      {"prefill 512x1024->1024", 512, 1024, 1024},  {"odd 37x1001->333", 37, 1001, 333},
  };
  const bool cpu_time = o.threads == 1;
  const double peak1 = PeakAllThreads(1, o.min_seconds);
  const double peakn = o.threads == 1 ? peak1 : PeakAllThreads(o.threads, o.min_seconds);
  std::printf("measured peak (independent 8-float mul and add chains): %.1f GFLOP/s on 1 thread, %.1f on %d (%s)\n",
              peak1, peakn, o.threads, cpu_time ? "thread CPU time" : "wall time");
  std::printf("%-26s %8s %10s %10s %8s %9s %s\n", "shape", "threads", "Dot GF/s", "new GF/s",
              "speedup", "% peak", "bitwise");
  CpuBackend backend(o.threads);
  ThreadPool pool(o.threads);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  nlohmann::json results = nlohmann::json::array();
  bool all_equal = true;
  for (const Shape& s : shapes) {
    std::vector<float> x(s.rows * s.in), w(static_cast<int64_t>(s.out) * s.in);
    for (float& v : x) v = dist(rng);
    for (float& v : w) v = dist(rng);
    std::vector<float> ref(s.rows * s.out), got(s.rows * s.out);
    const double flops = 2.0 * s.rows * s.in * s.out;
    const double t_dot = TimePerCall(o.min_seconds, cpu_time, [&] {
      DotLinear(pool, x.data(), s.rows, s.in, w.data(), s.out, ref.data());
    });
    const double t_new = TimePerCall(o.min_seconds, cpu_time, [&] {
      backend.Linear(x.data(), s.rows, s.in, w.data(), s.out, got.data());
    });
    const bool equal = std::memcmp(ref.data(), got.data(), ref.size() * sizeof(float)) == 0;
    all_equal = all_equal && equal;
    const double g_dot = flops / t_dot / 1e9, g_new = flops / t_new / 1e9;
    std::printf("%-26s %8d %10.2f %10.2f %7.2fx %8.1f%% %s\n", s.name, o.threads, g_dot, g_new,
                g_new / g_dot, 100.0 * g_new / peakn, equal ? "yes" : "NO");
    results.push_back({{"shape", s.name},
                       {"rows", s.rows},
                       {"in", s.in},
                       {"out", s.out},
                       {"threads", o.threads},
                       {"dot_gflops", g_dot},
                       {"gflops", g_new},
                       {"weight_gbps", 4.0 * s.in * s.out / t_new / 1e9},
                       {"bitwise_equal_to_dot", equal}});
  }
  if (!o.json_out.empty()) {
    std::ofstream(o.json_out) << nlohmann::json({{"peak_gflops_1_thread", peak1},
                                                 {"peak_gflops", peakn},
                                                 {"results", results}})
                                     .dump(2)
                              << "\n";
  }
  return all_equal ? 0 : 1;
}
