// NCCL.VERSION: is the NCCL a node's engine loads one with a known hang on DGX Sparks
// (aarch64)? From `spark-bench nccl-info` on the node (bench/nccl_probe.h) and a table of known
// problems, each with the versions it affects and where it is fixed:
//   - the proxy-op pool leak (a weak compare-exchange whose retry tests the value, not the
//     result: on aarch64 freed op slots are lost until a rank's pool is empty and the whole
//     collective hangs without an error): NCCL 2.28.9 and 2.29.2, fixed in 2.29.3 -> FAIL;
//   - the IB send path reading the CTS slot's request count before its index (no fence on
//     aarch64: the proxy thread can spin forever): NVIDIA/nccl pull request #2393, in no release
//     yet -> a warning on aarch64 that names it.
// x86_64 is affected by neither (its loads stay in order, its CAS does not fail spuriously).
// Pure; no I/O. Thread-safety: functions.
#pragma once

#include <string>
#include <vector>

#include "sparkctl/bench/nccl_probe.h"
#include "sparkctl/host/checks.h"

namespace spark::selftest {

struct KnownNcclHang {
  int first = 0;  // first affected version code (major * 10000 + minor * 100 + patch)
  int fixed = 0;  // first fixed version code; 0 = no release has the fix yet
  const char* arch = "aarch64";
  const char* what;
  const char* reference;
};

// The table above, in the order the checks report it.
const std::vector<KnownNcclHang>& KnownNcclHangs();

// NCCL.VERSION results of one node (one line per matching problem, or one ok/warn line).
std::vector<host::CheckResult> NcclVersionChecks(const std::string& node,
                                                 const bench::NcclProbe& probe);

}  // namespace spark::selftest
