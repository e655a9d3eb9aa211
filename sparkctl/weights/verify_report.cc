#include "sparkctl/weights/verify_report.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "base/strings.h"

namespace spark::weights {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;  // output keeps "schema" first, as written

OrderedJson FileToJson(const FileCheck& f) {
  OrderedJson j = {{"path", f.path}, {"state", FileStateName(f.state)}};
  j["expected_size"] = f.expected_size ? OrderedJson(*f.expected_size) : OrderedJson(nullptr);
  j["actual_size"] = f.actual_size ? OrderedJson(*f.actual_size) : OrderedJson(nullptr);
  j["expected_sha256"] = f.expected_sha256;
  j["actual_sha256"] = f.actual_sha256;
  j["from_cache"] = f.from_cache;
  j["detail"] = f.detail;
  return j;
}

std::optional<uint64_t> OptionalSize(const Json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<uint64_t>();
}

FileCheck FileFromJson(const Json& j) {
  FileCheck f;
  f.path = j.at("path").get<std::string>();
  std::string state = j.at("state").get<std::string>();
  std::optional<FileState> parsed = ParseFileState(state);
  if (!parsed) throw std::invalid_argument("files: unknown state \"" + state + "\"");
  f.state = *parsed;
  f.expected_size = OptionalSize(j, "expected_size");
  f.actual_size = OptionalSize(j, "actual_size");
  f.expected_sha256 = j.value("expected_sha256", "");
  f.actual_sha256 = j.value("actual_sha256", "");
  f.from_cache = j.value("from_cache", false);
  f.detail = j.value("detail", "");
  return f;
}

VerifyReport ReportFromJson(const Json& doc) {
  VerifyReport r;
  r.node = doc.at("node").get<std::string>();
  r.dir = doc.at("dir").get<std::string>();
  r.manifest = doc.value("manifest", "");
  r.repository = doc.value("repository", "");
  r.revision = doc.value("revision", "");
  r.bytes_total = doc.at("bytes_total").get<uint64_t>();
  r.bytes_hashed = doc.at("bytes_hashed").get<uint64_t>();
  r.bytes_cached = doc.at("bytes_cached").get<uint64_t>();
  r.seconds = doc.at("seconds").get<double>();
  r.threads = doc.value("threads", 0);
  r.warnings = doc.value("warnings", std::vector<std::string>{});
  for (const Json& f : doc.at("files")) r.files.push_back(FileFromJson(f));
  return r;
}

}  // namespace

std::string FormatVerifyReportJson(const VerifyReport& report, bool allow_extra) {
  OrderedJson counts = OrderedJson::object();
  for (FileState s : {FileState::kOk, FileState::kMissing, FileState::kSizeMismatch,
                      FileState::kHashMismatch, FileState::kExtra, FileState::kUnreadable}) {
    counts[std::string(FileStateName(s))] = report.Count(s);
  }
  OrderedJson files = OrderedJson::array();
  for (const FileCheck& f : report.files) files.push_back(FileToJson(f));
  OrderedJson doc = {{"schema", kVerifyReportSchema},  {"ok", report.ok(allow_extra)},
              {"node", report.node},            {"dir", report.dir},
              {"manifest", report.manifest},    {"repository", report.repository},
              {"revision", report.revision},    {"counts", counts},
              {"bytes_total", report.bytes_total}, {"bytes_hashed", report.bytes_hashed},
              {"bytes_cached", report.bytes_cached}, {"seconds", report.seconds},
              {"threads", report.threads},      {"warnings", report.warnings},
              {"files", files}};
  return doc.dump(2) + "\n";
}

Result<VerifyReport> ParseVerifyReportJson(std::string_view text, std::string_view source) {
  try {
    Json doc = Json::parse(text);
    std::string schema = doc.value("schema", "");
    if (schema != kVerifyReportSchema) {
      return InvalidArgumentError(std::string(source) + ": schema \"" + schema +
                                  "\" is not " + std::string(kVerifyReportSchema) +
                                  "; run the same sparkctl version on every node");
    }
    return ReportFromJson(doc);
  } catch (const std::exception& e) {  // nlohmann::json::exception and our invalid_argument
    return InvalidArgumentError(std::string(source) + ": bad verify report: " + e.what());
  }
}

std::string FormatVerifyReportText(const VerifyReport& report, bool allow_extra) {
  std::string out;
  for (const FileCheck& f : report.files) {
    if (f.state == FileState::kOk) continue;
    out += std::string(FileStateName(f.state)) + "  " + f.path + ": " + f.detail + "\n";
  }
  char rate[64] = "";
  if (report.seconds > 0 && report.bytes_hashed > 0) {
    std::snprintf(rate, sizeof(rate), ", %s/s",
                  HumanBytes(static_cast<uint64_t>(report.bytes_hashed / report.seconds)).c_str());
  }
  char secs[32];
  std::snprintf(secs, sizeof(secs), "%.2f s", report.seconds);
  out += std::string(report.ok(allow_extra) ? "OK" : "FAILED") + ": " + report.node + ":" +
         report.dir + ": " + std::to_string(report.Count(FileState::kOk)) + "/" +
         std::to_string(report.files.size()) + " files ok, " + HumanBytes(report.bytes_total) +
         " (" + HumanBytes(report.bytes_hashed) + " hashed, " + HumanBytes(report.bytes_cached) +
         " from cache) in " + secs + rate + "\n";
  for (const std::string& w : report.warnings) out += "warning: " + w + "\n";
  return out;
}

}  // namespace spark::weights
