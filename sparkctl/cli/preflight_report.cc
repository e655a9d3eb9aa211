#include "sparkctl/cli/preflight_report.h"

#include <unistd.h>

#include <cstdio>
#include <string>

namespace spark::cli {

void PrintCheckTable(const std::vector<host::CheckResult>& results) {
  bool color = isatty(STDOUT_FILENO);
  std::printf("%-18s %-12s %-5s %s\n", "CHECK", "NODE", "", "SEEN");
  int fails = 0, warns = 0;
  for (const auto& r : results) {
    const char* mark = r.verdict == host::Verdict::kOk ? "ok" : r.verdict == host::Verdict::kWarn ? "WARN" : "FAIL";
    const char* on = !color ? "" : r.verdict == host::Verdict::kOk ? "\033[32m" : r.verdict == host::Verdict::kWarn ? "\033[33m" : "\033[31m";
    std::printf("%-18s %-12s %s%-5s%s %s\n", r.id.c_str(), r.node.empty() ? "-" : r.node.c_str(), on,
                mark, color ? "\033[0m" : "", r.seen.c_str());
    if (!r.hint.empty()) std::printf("%-18s %-12s       fix: %s\n", "", "", r.hint.c_str());
    fails += r.verdict == host::Verdict::kFail;
    warns += r.verdict == host::Verdict::kWarn;
  }
  if (fails == 0 && warns == 0) {
    std::printf("\nAll checks passed.\n");
  } else {
    std::printf("\n%d failed, %d warnings, %zu checks.\n", fails, warns, results.size());
  }
}

}  // namespace spark::cli
