// Lists the regular files of a local model directory, relative to it, in sorted order.
//
// Skipped: this library's own files (the verify cache and its temp files, ".cache/sparkctl/"
// where `weights fetch` keeps its download state), Hugging Face download metadata
// (".cache/huggingface/"), and any relative paths the caller names (e.g. the manifest being
// written into the same directory). Symlinks to files are listed (Hugging Face snapshots are
// symlinks into blobs/); symlinked directories are not entered (no loops).
// Thread-safety: pure function of the filesystem; safe from any thread.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"

namespace spark::weights {

struct LocalFile {
  std::string path;  // relative to the directory, '/'-separated
  uint64_t size = 0;
};

// True for paths every listing skips (see above).
bool IsIgnoredPath(const std::string& rel_path);

// NotFound / FailedPrecondition (not a directory) / PermissionDenied naming the path.
Result<std::vector<LocalFile>> ListLocalFiles(const std::string& dir,
                                              const std::set<std::string>& also_skip = {});

// `path` relative to `dir` when it lies inside it (after resolving both), else "".
std::string RelativeInside(const std::string& dir, const std::string& path);

}  // namespace spark::weights
