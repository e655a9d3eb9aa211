// Whole-file reads and crash-safe whole-file writes for the small files this library keeps
// (manifests, the verify cache).
//
// A write goes to "<path>.tmp.<pid>.<n>" in the same directory, is fsync'ed, renamed over the
// target and the directory is fsync'ed: readers see the old or the new content, never a torn file,
// and a failed write (ENOSPC, EIO, ...) leaves the old file as it was and removes its temp file.
// Thread-safety: safe from any thread; concurrent writers of one path: the last rename wins.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace spark::weights {

// The whole content of `path`. NotFound, PermissionDenied, ... naming the file.
Result<std::string> ReadWholeFile(const std::string& path);

// Replaces `path` with `content` atomically (see above). Errors name the file and the errno.
Status WriteFileAtomically(const std::string& path, std::string_view content);

// True for names WriteFileAtomically uses for its temp files next to `target_name`.
bool IsAtomicTempName(std::string_view name, std::string_view target_name);

}  // namespace spark::weights
