// Verification of one local copy of a checkpoint against its manifest: what every node runs
// (`sparkctl weights verify --manifest FILE --dir DIR --json`), and what the controller will run
// on all nodes over SSH, parsing each node's VerifyReport (verify_report.h).
//
// Each manifest file is stat'ed; a missing file or a size mismatch is reported without reading it;
// unchanged files are answered from the verify cache (verify_cache.h); the rest are hashed in
// parallel (parallel_hash.h). Files on disk that the manifest does not list are reported as extra.
// Nothing in DIR is ever modified except the cache file.
// Thread-safety: VerifyDirectory blocks and uses its own worker threads; call it from one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sparkctl/weights/manifest.h"
#include "sparkctl/weights/progress.h"
#include "sparkctl/weights/sha256.h"

namespace spark::weights {

enum class FileState { kOk, kMissing, kSizeMismatch, kHashMismatch, kExtra, kUnreadable };

// "ok", "missing", "size_mismatch", "hash_mismatch", "extra", "unreadable".
std::string_view FileStateName(FileState state);
std::optional<FileState> ParseFileState(std::string_view name);

struct FileCheck {
  std::string path;  // relative to the directory
  FileState state = FileState::kOk;
  std::optional<uint64_t> expected_size;  // from the manifest (none for SHA256SUMS, extras)
  std::optional<uint64_t> actual_size;    // none when missing
  std::string expected_sha256;            // "" for extras
  std::string actual_sha256;              // "" when not hashed (missing, size mismatch, extra)
  bool from_cache = false;
  std::string detail;  // one line for people: what is wrong and the fix
};

// The result of one node's verify; serialised by verify_report.h.
struct VerifyReport {
  std::string node;        // hostname of the machine that ran the check
  std::string dir;         // the directory as given
  std::string manifest;    // the manifest path as given
  std::string repository;  // from the manifest
  std::string revision;
  std::vector<FileCheck> files;  // manifest order, then extras (sorted)
  uint64_t bytes_total = 0;      // sum of the manifest files' sizes found on disk
  uint64_t bytes_hashed = 0;     // read and hashed this run
  uint64_t bytes_cached = 0;     // answered from the cache
  double seconds = 0;
  int threads = 0;
  std::vector<std::string> warnings;  // cache problems etc.; never change the verdict

  size_t Count(FileState state) const;
  // True when every file is ok (extras count as failures unless allowed by the caller).
  bool ok(bool allow_extra = false) const;
};

struct VerifyOptions {
  std::string dir;
  std::string manifest_path;  // for the report, and skipped as an extra when inside dir
  bool use_cache = true;
  std::string cache_path;  // default: dir + "/" + kVerifyCacheName
  int threads = 0;         // 0: every available CPU
  HashOptions hash;
  ProgressOptions progress;
  std::string node;  // default: this machine's hostname
};

// Checks dir against manifest. Per-file problems are in the report (never an error); the
// Result fails only when dir itself cannot be used (NotFound, FailedPrecondition,
// PermissionDenied naming it) or the manifest lists no file (InvalidArgument).
Result<VerifyReport> VerifyDirectory(const Manifest& manifest, const VerifyOptions& options);

// This machine's hostname ("localhost" when unknown).
std::string LocalHostname();

}  // namespace spark::weights
