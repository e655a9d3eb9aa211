// The node-side verify cache: remembers the SHA-256 of a file for as long as the file provably
// has not changed, so re-verifying 500 GB of unchanged shards takes milliseconds.
//
// Key: relative path + (device, inode, size, mtime_ns, ctime_ns). ctime cannot be set from user
// space, so even a rewrite that restores the old mtime (touch -r, rsync -t) invalidates the entry.
// An entry is trusted only when the file's mtime is more than kRacyWindow older than the moment
// its hash was taken: a file rewritten within the same timestamp tick as the hashing could keep
// its mtime, so such "racy" entries are re-hashed (the same rule as git's index).
//
// Stored as JSON in DIR/.sparkctl-verify-cache.json by default (docs/weights.md says why); saved
// atomically (atomic_file.h). A missing, unreadable or corrupt cache is treated as empty.
// Thread-safety: none; the verifier uses it from one thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "base/status.h"

namespace spark::weights {

inline constexpr std::string_view kVerifyCacheName = ".sparkctl-verify-cache.json";
inline constexpr std::string_view kVerifyCacheSchema = "sparkctl-weights-verify-cache/v1";
inline constexpr int64_t kRacyWindowNs = 2'000'000'000;

struct FileIdentity {
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  friend bool operator==(const FileIdentity&, const FileIdentity&) = default;
};

// stat() (following symlinks) of `path`. NotFound / PermissionDenied naming the file;
// FailedPrecondition when it is not a regular file.
Result<FileIdentity> StatIdentity(const std::string& path);

// Nanoseconds since the epoch on CLOCK_REALTIME (the clock file times are taken from).
int64_t WallClockNs();

class VerifyCache {
 public:
  struct Entry {
    FileIdentity identity;
    std::string sha256;
    int64_t hashed_at_ns = 0;  // wall clock when the file was stat'ed before hashing
  };

  // Loads `path`. Never fails: a missing file gives an empty cache; an unreadable or corrupt one
  // gives an empty cache and a one-line explanation in *warning.
  static VerifyCache Load(const std::string& path, std::string* warning);

  // The remembered hash when `identity` matches and the entry is not racy.
  std::optional<std::string> Lookup(const std::string& rel_path,
                                    const FileIdentity& identity) const;
  void Store(const std::string& rel_path, const FileIdentity& identity, std::string sha256,
             int64_t hashed_at_ns);
  // Drops entries whose path is not in `keep` (files no longer in the manifest).
  void Retain(const std::set<std::string>& keep);
  size_t size() const { return entries_.size(); }

  std::string ToJson() const;
  // Writes atomically; on failure the previous cache file is untouched.
  Status Save(const std::string& path) const;

 private:
  std::map<std::string, Entry> entries_;
};

}  // namespace spark::weights
