// JSON form of a VerifyReport: the stdout of `sparkctl weights verify --json` on a node, which the
// controller parses back when it verifies every node of a cluster over SSH. Versioned by
// kVerifyReportSchema; a reader rejects other major versions.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "sparkctl/weights/manifest_verify.h"

namespace spark::weights {

inline constexpr std::string_view kVerifyReportSchema = "sparkctl-weights-verify/v1";

// One JSON document (with "schema", "ok", counts, and one object per file).
std::string FormatVerifyReportJson(const VerifyReport& report, bool allow_extra = false);

// Parses FormatVerifyReportJson's output. `source` names where it came from ("spark-2: stdout")
// in errors: InvalidArgument for bad JSON, a wrong schema or a bad field.
Result<VerifyReport> ParseVerifyReportJson(std::string_view text, std::string_view source);

// Human table: one line per file that is not ok, then a summary line.
std::string FormatVerifyReportText(const VerifyReport& report, bool allow_extra = false);

}  // namespace spark::weights
