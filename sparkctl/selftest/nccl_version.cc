// NCCL.VERSION (see nccl_version.h).
#include "sparkctl/selftest/nccl_version.h"

namespace spark::selftest {
namespace {

using host::CheckResult;
using host::Verdict;

constexpr char kId[] = "NCCL.VERSION";

std::string Text(int code) {
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

}  // namespace

const std::vector<KnownNcclHang>& KnownNcclHangs() {
  static const std::vector<KnownNcclHang> kHangs = {
      {22809, 22903, "aarch64",
       "proxy-op pool leak: freed op slots are lost until a rank's pool runs dry, then every "
       "rank hangs in the collective without an error",
       "fixed in NCCL 2.29.3 (release notes: \"Fixed CAS usage\")"},
      {0, 0, "aarch64",
       "IB send path: the CTS slot's request count can be read before its index, and the "
       "proxy thread spins forever",
       "NVIDIA/nccl pull request #2393 (no release carries it yet)"},
  };
  return kHangs;
}

std::vector<CheckResult> NcclVersionChecks(const std::string& node, const bench::NcclProbe& p) {
  std::vector<CheckResult> out;
  if (p.version <= 0) {
    // A CPU engine loads no NCCL: nothing to check. Anything else unknown is worth a look.
    const bool cpu_engine = p.engine_found && !p.engine_links_nccl && p.note.find("does not load") !=
                                                                          std::string::npos;
    out.push_back({kId, node, cpu_engine ? Verdict::kOk : Verdict::kWarn,
                   "NCCL version unknown: " + p.note,
                   cpu_engine ? "" : "run `spark-bench nccl-info --engine <spark-engine>` there"});
    return out;
  }
  const std::string where = "NCCL " + p.VersionText() + " (" + p.library + ") on " + p.arch;
  for (const KnownNcclHang& h : KnownNcclHangs()) {
    if (p.arch != h.arch || p.version < h.first) continue;
    if (h.fixed > 0 && p.version >= h.fixed) continue;
    if (h.fixed > 0) {
      out.push_back({kId, node, Verdict::kFail, where + ": " + h.what + " (" + h.reference + ")",
                     "install NCCL " + Text(h.fixed) +
                         " or later and point the engine at it (or rebuild spark-engine "
                         "against it)"});
    } else {
      out.push_back({kId, node, Verdict::kWarn, where + ": " + h.what + " (" + h.reference + ")",
                     "watch for an NCCL release with the fix; small all-reduces can avoid NCCL "
                     "with engine.collectives.oneshot_max_bytes"});
    }
  }
  if (out.empty()) out.push_back({kId, node, Verdict::kOk, where + ": no known hang"});
  return out;
}

}  // namespace spark::selftest
