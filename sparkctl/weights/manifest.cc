#include "sparkctl/weights/manifest.h"

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "sparkctl/weights/atomic_file.h"

namespace spark::weights {
namespace {

using Json = nlohmann::json;

// Byte offsets of the parts of a (valid) manifest document that errors point at.
struct SourcePositions {
  std::map<std::string, size_t> top_keys;  // top-level key -> offset of the key
  std::vector<size_t> file_entries;        // offset of each element of "files"
};

size_t SkipString(std::string_view text, size_t i) {  // i at the opening quote
  for (++i; i < text.size() && text[i] != '"'; ++i) {
    if (text[i] == '\\') ++i;
  }
  return i;  // at the closing quote
}

size_t NextNonBlank(std::string_view text, size_t i) {
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  return i;
}

// One pass over text that nlohmann already accepted, so it can be lenient.
SourcePositions ScanPositions(std::string_view text) {
  SourcePositions positions;
  int depth = 0, files_depth = -1;
  bool expect_element = false;
  std::string last_key;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) continue;
    if (depth == files_depth && expect_element && c != ']') {
      positions.file_entries.push_back(i);
      expect_element = false;
    }
    if (c == '"') {
      size_t end = SkipString(text, i);
      size_t after = NextNonBlank(text, end + 1);
      if (depth == 1 && after < text.size() && text[after] == ':') {
        last_key = std::string(text.substr(i + 1, end - i - 1));
        positions.top_keys.emplace(last_key, i);
      }
      i = end;
    } else if (c == '{' || c == '[') {
      ++depth;
      if (c == '[' && depth == 2 && last_key == "files") files_depth = depth, expect_element = true;
    } else if (c == '}' || c == ']') {
      if (depth == files_depth) files_depth = -1;
      --depth;
    } else if (c == ',' && depth == files_depth) {
      expect_element = true;
    }
  }
  return positions;
}

size_t LineOf(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + offset, '\n'));
}

// Collects problems, each already prefixed with "file:line: ".
class Problems {
 public:
  Problems(std::string_view source, std::string_view text) : source_(source), text_(text) {}
  void Add(size_t offset, const std::string& message) {
    lines_.push_back(std::string(source_) + ":" + std::to_string(LineOf(text_, offset)) + ": " +
                     message);
  }
  Status ToStatus() const {
    if (lines_.empty()) return Status::Ok();
    return InvalidArgumentError(Join(lines_, "\n"));
  }

 private:
  std::string_view source_;
  std::string_view text_;
  std::vector<std::string> lines_;
};

std::string Lowercase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

void ParseSize(const Json& value, ManifestEntry& entry, const std::string& where, size_t offset,
               Problems& problems) {
  if (value.is_number_unsigned()) {
    entry.size = value.get<uint64_t>();
  } else if (value.is_number_integer()) {
    problems.Add(offset, where + ": size " + value.dump() + " is negative; use the file size in "
                                 "bytes (stat -c %s FILE)");
  } else {
    problems.Add(offset, where + ": size must be a non-negative integer (bytes), got " +
                             value.dump());
  }
}

void ParseSha(const Json& value, ManifestEntry& entry, const std::string& where, size_t offset,
              Problems& problems) {
  std::string hex = value.is_string() ? Lowercase(value.get<std::string>()) : "";
  if (!IsSha256Hex(hex)) {
    problems.Add(offset, where + ": sha256 " + value.dump() +
                             " is not 64 hex digits; take it from `sha256sum FILE`");
    return;
  }
  entry.sha256 = hex;
}

void ParseEntry(const Json& item, size_t index, size_t offset, Manifest& manifest,
                Problems& problems) {
  std::string where = "files[" + std::to_string(index) + "]";
  if (!item.is_object()) return problems.Add(offset, where + ": must be an object");
  ManifestEntry entry;
  if (item.contains("path") && item["path"].is_string()) {
    entry.path = item["path"].get<std::string>();
    where += " (\"" + entry.path + "\")";
    Status path_ok = CheckRelativePath(entry.path);
    if (!path_ok.ok()) problems.Add(offset, where + ": " + path_ok.message());
  } else {
    problems.Add(offset, where + ": \"path\" (a string) is required");
  }
  for (const auto& [key, value] : item.items()) {
    if (key == "size") ParseSize(value, entry, where, offset, problems);
    else if (key == "sha256") ParseSha(value, entry, where, offset, problems);
    else if (key != "path") {
      problems.Add(offset, where + ": unknown key \"" + key + "\"" +
                               DidYouMean(key, {"path", "size", "sha256"}));
    }
  }
  if (!item.contains("size")) problems.Add(offset, where + ": \"size\" is required");
  if (!item.contains("sha256")) problems.Add(offset, where + ": \"sha256\" is required");
  manifest.files.push_back(std::move(entry));
}

void CheckDuplicates(const Manifest& manifest, const SourcePositions& positions,
                     Problems& problems) {
  std::map<std::string, size_t> first_index;
  for (size_t i = 0; i < manifest.files.size(); ++i) {
    const std::string& path = manifest.files[i].path;
    if (path.empty()) continue;
    auto [it, inserted] = first_index.emplace(path, i);
    if (inserted) continue;
    size_t offset = i < positions.file_entries.size() ? positions.file_entries[i] : 0;
    problems.Add(offset, "files[" + std::to_string(i) + "] (\"" + path +
                             "\"): duplicate path, already listed as files[" +
                             std::to_string(it->second) + "]; keep one entry");
  }
}

void ParseHeader(const Json& doc, const SourcePositions& positions, Manifest& manifest,
                 Problems& problems) {
  auto offset_of = [&](const std::string& key) {
    auto it = positions.top_keys.find(key);
    return it == positions.top_keys.end() ? size_t{0} : it->second;
  };
  for (const auto& [key, value] : doc.items()) {
    if (key == "schema") {
      if (value != Json(kManifestSchema)) {
        problems.Add(offset_of(key), "schema " + value.dump() + " is not supported; expected \"" +
                                         std::string(kManifestSchema) + "\"");
      }
    } else if (key == "repository" || key == "revision") {
      if (!value.is_string()) problems.Add(offset_of(key), key + " must be a string");
      else (key == "repository" ? manifest.repository : manifest.revision) = value;
    } else if (key != "files") {
      problems.Add(offset_of(key), "unknown key \"" + key + "\"" +
                                       DidYouMean(key, {"schema", "repository", "revision", "files"}));
    }
  }
  if (!doc.contains("files") || !doc["files"].is_array()) {
    problems.Add(offset_of("files"), "\"files\" (an array of {path, size, sha256}) is required");
  }
}

Result<Json> ParseJsonDocument(std::string_view text, std::string_view source) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    // e.byte is 1-based; report line and column of the offending byte.
    size_t offset = e.byte == 0 ? 0 : std::min<size_t>(e.byte - 1, text.size());
    size_t line_start = text.rfind('\n', offset == 0 ? 0 : offset - 1);
    line_start = line_start == std::string_view::npos ? 0 : line_start + 1;
    std::string what = e.what();
    size_t colon = what.find("syntax error");
    return InvalidArgumentError(std::string(source) + ":" + std::to_string(LineOf(text, offset)) +
                                ":" + std::to_string(offset - line_start + 1) + ": bad JSON: " +
                                (colon == std::string::npos ? what : what.substr(colon)));
  }
}

bool IsPlainName(std::string_view name) {
  if (name.empty() || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

}  // namespace

uint64_t Manifest::TotalKnownBytes() const {
  uint64_t total = 0;
  for (const auto& f : files) total += f.size.value_or(0);
  return total;
}

bool IsSha256Hex(std::string_view hex) {
  return hex.size() == 64 && std::all_of(hex.begin(), hex.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

Status CheckRelativePath(std::string_view path) {
  if (path.empty()) return InvalidArgumentError("path is empty");
  if (path.front() == '/') return InvalidArgumentError("path must be relative, not absolute");
  if (path.find_first_of("\\\n\r") != std::string_view::npos || path.find('\0') != path.npos) {
    return InvalidArgumentError("path contains a backslash, newline or NUL");
  }
  for (const std::string& part : Split(path, '/')) {
    if (part.empty()) return InvalidArgumentError("path has an empty component (\"//\" or trailing /)");
    if (part == "." || part == "..") {
      return InvalidArgumentError("path must not contain \".\" or \"..\" components");
    }
  }
  return Status::Ok();
}

Result<Manifest> ParseManifestJson(std::string_view text, std::string_view source) {
  SPARK_ASSIGN_OR_RETURN(Json doc, ParseJsonDocument(text, source));
  Problems problems(source, text);
  if (!doc.is_object()) {
    problems.Add(0, "a manifest is a JSON object {\"schema\", \"repository\", \"revision\", "
                    "\"files\"}");
    return problems.ToStatus();
  }
  SourcePositions positions = ScanPositions(text);
  Manifest manifest;
  ParseHeader(doc, positions, manifest, problems);
  if (doc.contains("files") && doc["files"].is_array()) {
    const Json& files = doc["files"];
    for (size_t i = 0; i < files.size(); ++i) {
      size_t offset = i < positions.file_entries.size() ? positions.file_entries[i] : 0;
      ParseEntry(files[i], i, offset, manifest, problems);
    }
    CheckDuplicates(manifest, positions, problems);
  }
  SPARK_RETURN_IF_ERROR(problems.ToStatus());
  return manifest;
}

std::string FormatManifestJson(const Manifest& manifest) {
  std::string out = "{\n";
  out += "  \"schema\": " + Json(kManifestSchema).dump() + ",\n";
  out += "  \"repository\": " + Json(manifest.repository).dump() + ",\n";
  out += "  \"revision\": " + Json(manifest.revision).dump() + ",\n";
  out += "  \"files\": [";
  for (size_t i = 0; i < manifest.files.size(); ++i) {
    const ManifestEntry& f = manifest.files[i];
    out += i ? ",\n    " : "\n    ";
    out += "{\"path\": " + Json(f.path).dump() + ", \"size\": " +
           std::to_string(f.size.value_or(0)) + ", \"sha256\": \"" + f.sha256 + "\"}";
  }
  out += manifest.files.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

Result<Manifest> ParseSha256Sums(std::string_view text, std::string_view source) {
  Manifest manifest;
  Problems problems(source, text);
  std::map<std::string, size_t> seen;
  size_t offset = 0;
  for (const std::string& raw : Split(text, '\n')) {
    size_t line_offset = offset;
    offset += raw.size() + 1;
    std::string_view line = raw;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (Trim(line).empty() || line.front() == '#') continue;
    bool shaped = line.size() > 66 && line[64] == ' ' && (line[65] == ' ' || line[65] == '*');
    std::string hex = shaped ? Lowercase(std::string(line.substr(0, 64))) : "";
    if (!shaped || !IsSha256Hex(hex)) {
      problems.Add(line_offset, "expected \"<64 hex digits>  <path>\" (sha256sum output)");
      continue;
    }
    ManifestEntry entry{.path = std::string(line.substr(66)), .size = std::nullopt, .sha256 = hex};
    Status path_ok = CheckRelativePath(entry.path);
    if (!path_ok.ok()) problems.Add(line_offset, "\"" + entry.path + "\": " + path_ok.message());
    if (!seen.emplace(entry.path, manifest.files.size()).second) {
      problems.Add(line_offset, "\"" + entry.path + "\": duplicate path; keep one line");
    }
    manifest.files.push_back(std::move(entry));
  }
  SPARK_RETURN_IF_ERROR(problems.ToStatus());
  return manifest;
}

std::string FormatSha256Sums(const Manifest& manifest) {
  std::string out;
  for (const ManifestEntry& f : manifest.files) out += f.sha256 + "  " + f.path + "\n";
  return out;
}

ManifestFormat DetectManifestFormat(std::string_view text) {
  size_t i = NextNonBlank(text, 0);
  return i < text.size() && text[i] == '{' ? ManifestFormat::kJson : ManifestFormat::kSha256Sums;
}

ManifestFormat FormatForOutputPath(std::string_view path) {
  std::string name = Lowercase(std::string(path.substr(path.rfind('/') + 1)));
  bool sums = name == "sha256sums" || EndsWith(name, ".sha256") || EndsWith(name, ".sha256sum") ||
              EndsWith(name, ".sha256sums");
  return sums ? ManifestFormat::kSha256Sums : ManifestFormat::kJson;
}

Result<Manifest> ReadManifestFile(const std::string& path) {
  SPARK_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  if (DetectManifestFormat(text) == ManifestFormat::kJson) return ParseManifestJson(text, path);
  return ParseSha256Sums(text, path);
}

Status WriteManifestFile(const std::string& path, const Manifest& manifest,
                         ManifestFormat format) {
  Manifest sorted = manifest;
  std::sort(sorted.files.begin(), sorted.files.end(),
            [](const ManifestEntry& a, const ManifestEntry& b) { return a.path < b.path; });
  return WriteFileAtomically(path, format == ManifestFormat::kJson ? FormatManifestJson(sorted)
                                                                   : FormatSha256Sums(sorted));
}

Result<std::string> ManifestRelativePath(std::string_view repository, std::string_view revision) {
  std::vector<std::string> parts = Split(repository, '/');
  if (parts.size() != 2 || !IsPlainName(parts[0]) || !IsPlainName(parts[1])) {
    return InvalidArgumentError("repository \"" + std::string(repository) +
                                "\" must be \"owner/name\" (letters, digits, '-', '_', '.')");
  }
  if (!IsPlainName(revision)) {
    return InvalidArgumentError("revision \"" + std::string(revision) +
                                "\" must be a commit hash or tag (letters, digits, '-', '_', '.')");
  }
  return "profiles/checkpoints/" + parts[0] + "--" + parts[1] + "/" + std::string(revision) +
         ".json";
}

}  // namespace spark::weights
