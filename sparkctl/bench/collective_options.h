// The options of one collective benchmark run (nccl-tests' -b -e -f -i -n -w -c), shared by
// `sparkctl bench allreduce|allgather` and the per-rank program `spark-bench` it starts, which
// receive them as the same flags (RankArgs).
// Thread-safety: values.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"
#include "sparkctl/bench/nccl_format.h"

namespace spark::bench {

struct CollectiveOptions {
  Collective collective = Collective::kAllReduce;
  size_t min_bytes = 32u << 20;  // -b, default 32M (as nccl-tests)
  size_t max_bytes = 32u << 20;  // -e, default 32M
  size_t step_factor = 1;        // -f, default off (step by bytes)
  size_t step_bytes = 1u << 20;  // -i, default 1M
  int iters = 20;                // -n
  int warmup_iters = 1;          // -w
  int check = 1;                 // -c: 1 = check every result, 0 = skip (#wrong shows N/A)
  // --transport (or its older spelling --backend): "auto" (NCCL when this build has CUDA and a
  // GPU is visible, else Gloo), "nccl", "gloo" or "oneshot" (comm/oneshot: every size of the
  // sweep through the one-shot transport, host memory on CPU ranks).
  std::string backend = "auto";
  // --transport oneshot: the wire ("socket" or "rdma") and, in local mode, the topology of its
  // links ("mesh", "ring", "line"; cluster mode takes the fabric plan's).
  std::string oneshot_wire = "socket";
  std::string oneshot_topology = "mesh";
  bool json = false;
  // Deadline for the rendezvous and each collective.
  std::chrono::seconds timeout{120};

  // InvalidArgument naming the flag: -b > -e, -n < 1, -w < 0, -c not 0/1, -f 0, bad transport,
  // wire or topology, a one-shot slice over 64 MiB.
  Status Validate() const;
};

// Where a rank is and how it finds the others.
struct RankPlacement {
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29600;  // the bench rendezvous; Gloo uses master_port + 1
  int device = 0;           // CUDA device ordinal for NCCL
  std::string host_label;   // the node name shown in the device lines ("" = hostname)
  // --transport oneshot in cluster mode: this rank's links from the fabric plan
  // (netplan/oneshot_links.h); empty: 127.0.0.1 and the options' topology.
  std::string oneshot_topology;
  std::string oneshot_addresses;  // "198.18.6.2,198.18.0.1"
  std::string oneshot_rails;      // "rocep1s0f1:3+roceP2p1s0f1:3,..."
};

// argv (after the program) for `spark-bench <collective> ...` that reproduces options+placement.
std::vector<std::string> RankArgs(const CollectiveOptions& options, const RankPlacement& placement);

}  // namespace spark::bench
