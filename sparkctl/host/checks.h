// Preflight checks: judge every node's facts (and the cabling) against the profile and the
// inventory. Each check has a stable ID, a verdict, the value seen and a fix hint — the traps of
// FIELD_NOTES.md, caught before they cost a day.
//
// Pure: no I/O. `sparkctl preflight` gathers the inputs over SSH and prints the results.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "netplan/cluster_spec.h"
#include "sparkctl/host/facts.h"
#include "sparkctl/profile/profile.h"

namespace spark::host {

enum class Verdict { kOk, kWarn, kFail };
std::string_view VerdictName(Verdict verdict);  // "ok", "warn", "fail"

struct CheckResult {
  std::string id;    // "CMA.NONZERO"
  std::string node;  // "" for cluster-wide checks
  Verdict verdict = Verdict::kOk;
  std::string seen;  // the value observed
  std::string hint;  // what to do (empty when ok)
};

// Every check ID preflight knows, in report order.
const std::vector<std::string>& AllCheckIds();

struct NodeObservation {
  std::string name;
  Result<NodeFacts> facts = InternalError("not gathered");  // an error: the node was unreachable
};

struct CablingFinding {
  std::string node;
  std::string message;
};

struct PreflightInput {
  const netplan::ClusterSpec* cluster = nullptr;
  const profile::Profile* profile = nullptr;  // optional
  std::vector<NodeObservation> nodes;
  // Cabling problems from discovery; nullopt when cabling was not probed.
  std::optional<std::vector<CablingFinding>> cabling;
};

std::vector<CheckResult> RunChecks(const PreflightInput& input);

bool AnyFailed(const std::vector<CheckResult>& results);
nlohmann::json ToJson(const std::vector<CheckResult>& results);

}  // namespace spark::host
