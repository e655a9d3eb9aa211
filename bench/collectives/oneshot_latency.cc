// oneshot_latency: the one-shot transport's per-call latency over its socket wire, ranks as
// threads of this process on loopback (no fabric, no other process: the software cost of a call
// and of a relay hop, as far as a shared machine lets one see it). For each size, every rank
// runs --iters back-to-back all-reduces after --warmup; rank 0's per-call times give p50 and
// p99. Prints a table and, with --json FILE, writes it (schema sparkctl-oneshot-latency/v1).
//   oneshot_latency --ranks 2 --topology mesh --sizes 4K,10K,64K --iters 2000
//   oneshot_latency --ranks 4 --topology ring --json ring4.json
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/collectives/latency_stats.h"
#include "comm/local_communicator.h"
#include "comm/oneshot/oneshot_communicator.h"

namespace {

using spark::comm::oneshot::OneShotCommunicator;
using Clock = std::chrono::steady_clock;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Per-call latency of the one-shot transport over loopback sockets"};
  int ranks = 2, iters = 2000, warmup = 200, spin_us = 200;
  std::string topology = "mesh", sizes_text = "4K,10K,64K", json_path;
  app.add_option("--ranks", ranks, "Ranks (threads), default 2");
  app.add_option("--topology", topology, "mesh (default), ring or line");
  app.add_option("--sizes", sizes_text, "Comma-separated sizes, default 4K,10K,64K");
  app.add_option("--iters", iters, "Timed calls per size, default 2000");
  app.add_option("--warmup", warmup, "Untimed calls per size, default 200");
  app.add_option("--spin-us", spin_us,
                 "How long a wait polls before it sleeps (the transport's default 200; 0 when "
                 "ranks outnumber cores)");
  app.add_option("--json", json_path, "Write the results here");
  CLI11_PARSE(app, argc, argv);
  const std::vector<size_t> sizes = spark::bench::ParseSizes(sizes_text);
  spark::comm::oneshot::OneShotOptions o;
  auto topo = spark::comm::oneshot::ParseTopology(topology);
  if (!topo.ok()) {
    std::fprintf(stderr, "oneshot_latency: %s\n", topo.status().message().c_str());
    return 2;
  }
  o.topology = *topo;
  o.capacity_bytes = *std::max_element(sizes.begin(), sizes.end());
  o.addresses = {"127.0.0.1"};
  o.transport.spin = std::chrono::microseconds(spin_us);
  auto locals = spark::comm::CreateLocalGroup(ranks);
  std::vector<std::unique_ptr<OneShotCommunicator>> comms(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto c = OneShotCommunicator::Create(std::move(locals[r]), o);
      if (!c.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", r, c.status().message().c_str());
        std::exit(2);
      }
      comms[r] = std::move(*c);
    });
  }
  for (auto& t : threads) t.join();
  nlohmann::json rows = nlohmann::json::array();
  std::printf("# oneshot_latency: %d ranks, %s, socket wire on loopback, %u cores, spin %d us\n",
              ranks, topology.c_str(), std::thread::hardware_concurrency(), spin_us);
  std::printf("%10s %10s %10s %10s\n", "bytes", "p50_us", "p99_us", "mean_us");
  for (size_t bytes : sizes) {
    std::vector<double> times;
    threads.clear();
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        std::vector<float> data(bytes / sizeof(float), 1.0f);
        for (int i = 0; i < warmup + iters; ++i) {
          const auto t0 = Clock::now();
          if (!comms[r]->AllReduceSum(data.data(), data.size()).ok()) std::exit(2);
          if (r == 0 && i >= warmup) {
            times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
          }
        }
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
    nlohmann::json j = {{"schema", "sparkctl-oneshot-latency/v1"},
                        {"ranks", ranks},
                        {"topology", topology},
                        {"wire", "socket (loopback)"},
                        {"cores", std::thread::hardware_concurrency()},
                        {"iters", iters},
                        {"spin_us", spin_us},
                        {"rows", rows}};
    std::ofstream(json_path) << j.dump(2) << "\n";
  }
  return 0;
}
