// Checkpoint manifests: the pinned list of files (relative path, size, SHA-256) that makes up one
// revision of a model repository. Stored as JSON under
// profiles/checkpoints/<owner>--<name>/<revision>.json and also readable/writable as a
// SHA256SUMS file (the `sha256sum -c` format, which has no sizes).
//
// Parsing never trusts its input: JSON syntax errors name file:line:column, semantic errors (bad
// hex, negative size, absolute or ".." paths, duplicates) name the entry and its line.
// Thread-safety: plain values and pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace spark::weights {

inline constexpr std::string_view kManifestSchema = "sparkctl-weights-manifest/v1";

struct ManifestEntry {
  std::string path;             // relative, '/'-separated, no "." / ".." / empty components
  std::optional<uint64_t> size;  // unknown when read from a SHA256SUMS file
  std::string sha256;           // 64 lowercase hex digits
};

struct Manifest {
  std::string repository;  // "owner/name" as on the model hub; may be empty for SHA256SUMS
  std::string revision;    // commit hash or tag the files were taken from
  std::vector<ManifestEntry> files;  // sorted by path by the writers

  uint64_t TotalKnownBytes() const;
};

enum class ManifestFormat { kJson, kSha256Sums };

// OK when `path` is a safe relative path; InvalidArgument saying what is wrong otherwise.
Status CheckRelativePath(std::string_view path);

// True for exactly 64 lowercase hex digits.
bool IsSha256Hex(std::string_view hex);

// Parses manifest JSON. `source` names the file in messages. InvalidArgument on bad JSON
// ("file:line:column: ...") or bad entries ("file:line: files[3] (\"a.bin\"): ...").
Result<Manifest> ParseManifestJson(std::string_view text, std::string_view source);

// Manifest as JSON: stable key order, one file entry per line (small diffs, precise lines).
std::string FormatManifestJson(const Manifest& manifest);

// Parses "<hex>  <path>" / "<hex> *<path>" lines. InvalidArgument naming file:line on errors.
Result<Manifest> ParseSha256Sums(std::string_view text, std::string_view source);

// The SHA256SUMS text (`sha256sum -c` checks it from the model directory).
std::string FormatSha256Sums(const Manifest& manifest);

// kJson when the first non-blank character is '{', else kSha256Sums.
ManifestFormat DetectManifestFormat(std::string_view text);

// kSha256Sums for names like SHA256SUMS, *.sha256, *.sha256sum; kJson otherwise.
ManifestFormat FormatForOutputPath(std::string_view path);

// Reads and parses a manifest of either format. NotFound / PermissionDenied / InvalidArgument.
Result<Manifest> ReadManifestFile(const std::string& path);

// Writes atomically (temp file + fsync + rename): on any failure (disk full, ...) the previous
// file is untouched and no temp file is left. Returns the errno-based Status naming the file.
Status WriteManifestFile(const std::string& path, const Manifest& manifest, ManifestFormat format);

// "profiles/checkpoints/<owner>--<name>/<revision>.json" relative to the repository top.
// InvalidArgument when repository is not "owner/name" or revision is not a plain name.
Result<std::string> ManifestRelativePath(std::string_view repository, std::string_view revision);

}  // namespace spark::weights
