// Gathers NodeFacts on the machine it runs on (`sparkctl node facts`), from the OS interfaces a
// DGX Spark exposes: /proc, /sys/class/{net,infiniband}, /etc files, nvidia-smi, iptables.
//
// Everything is read below `root` so tests can point it at a fake tree; commands go through
// `run` so tests can answer them. Missing pieces are recorded (present=false, -1, error text),
// never fatal: preflight decides what a missing piece means.
#pragma once

#include <functional>
#include <string>

#include "base/status.h"
#include "sparkctl/host/facts.h"

namespace spark::host {

struct GatherOptions {
  std::string root = "/";       // file system root to read from
  std::string disk_path = "/";  // where free space is measured (the model path, or its parent)
  // Runs a shell command and returns its stdout; an error when it cannot run or exits non-zero.
  // Default: /bin/sh -c with a 10 s limit.
  std::function<Result<std::string>(const std::string&)> run;
};

NodeFacts GatherFacts(const GatherOptions& options);

// Parsers, exposed for tests.
int64_t MeminfoValueKib(const std::string& meminfo, const std::string& key);  // -1 if absent
std::string MemlockFromLimits(const std::string& proc_limits);                // "unlimited"/KiB
std::string ForwardPolicyFromIptables(const std::string& iptables_s);         // "DROP"/"ACCEPT"/""
GpuFacts GpuFromNvidiaSmi(const std::string& csv_line);

}  // namespace spark::host
