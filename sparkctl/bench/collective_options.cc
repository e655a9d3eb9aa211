// Options of one collective benchmark run (see collective_options.h).
#include "sparkctl/bench/collective_options.h"

namespace spark::bench {

Status CollectiveOptions::Validate() const {
  if (min_bytes > max_bytes) {
    return InvalidArgumentError("-b " + std::to_string(min_bytes) + " is larger than -e " +
                                std::to_string(max_bytes) + ": the sweep runs from -b up to -e");
  }
  if (iters < 1) return InvalidArgumentError("-n must be at least 1 (timed iterations per size)");
  if (warmup_iters < 0) return InvalidArgumentError("-w must be 0 or more (warm-up iterations)");
  if (check != 0 && check != 1) return InvalidArgumentError("--check takes 0 (no check) or 1 (check)");
  if (step_factor == 0) return InvalidArgumentError("-f must be at least 1 (1 = step by -i)");
  if (step_factor == 1 && step_bytes == 0)
    return InvalidArgumentError("-i must be positive when -f is 1");
  if (backend != "auto" && backend != "nccl" && backend != "gloo" && backend != "oneshot")
    return InvalidArgumentError("--transport '" + backend + "': use auto, nccl, gloo or oneshot");
  if (oneshot_wire != "socket" && oneshot_wire != "rdma")
    return InvalidArgumentError("--wire '" + oneshot_wire + "': use socket or rdma");
  if (oneshot_topology != "mesh" && oneshot_topology != "ring" && oneshot_topology != "line")
    return InvalidArgumentError("--oneshot-topology '" + oneshot_topology +
                                "': use mesh, ring or line");
  if (backend == "oneshot" && max_bytes > (size_t{64} << 20))
    return InvalidArgumentError("-e " + std::to_string(max_bytes) +
                                ": the one-shot transport carries at most 64M per call");
  return Status::Ok();
}

std::vector<std::string> RankArgs(const CollectiveOptions& o, const RankPlacement& p) {
  std::vector<std::string> a = {
      std::string(CollectiveName(o.collective)),
      "-b", std::to_string(o.min_bytes), "-e", std::to_string(o.max_bytes),
      "-f", std::to_string(o.step_factor), "-i", std::to_string(o.step_bytes),
      "-n", std::to_string(o.iters), "-w", std::to_string(o.warmup_iters),
      "-c", std::to_string(o.check), "--backend", o.backend,
      "--timeout", std::to_string(o.timeout.count()),
      "--rank", std::to_string(p.rank), "--world-size", std::to_string(p.world_size),
      "--master", p.master_addr + ":" + std::to_string(p.master_port),
      "--device", std::to_string(p.device)};
  if (!p.host_label.empty()) a.insert(a.end(), {"--host-label", p.host_label});
  if (o.backend == "oneshot") {
    a.insert(a.end(), {"--oneshot-wire", o.oneshot_wire, "--oneshot-topology",
                       p.oneshot_topology.empty() ? o.oneshot_topology : p.oneshot_topology});
    if (!p.oneshot_addresses.empty()) a.insert(a.end(), {"--oneshot-addr", p.oneshot_addresses});
    if (!p.oneshot_rails.empty()) a.insert(a.end(), {"--oneshot-rails", p.oneshot_rails});
  }
  if (o.json) a.push_back("--json");
  return a;
}

}  // namespace spark::bench
