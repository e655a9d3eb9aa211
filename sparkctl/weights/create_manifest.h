// Builds a manifest from a local copy of a checkpoint (`sparkctl weights manifest DIR ...`):
// lists every regular file (local_tree.h), hashes them in parallel with a progress display, and
// records path, size and SHA-256. It reuses and refreshes the verify cache, so verifying the same
// directory right after creating its manifest reads nothing twice.
// Thread-safety: blocks and uses its own worker threads; call from one thread.
#pragma once

#include <string>

#include "base/status.h"
#include "sparkctl/weights/manifest.h"
#include "sparkctl/weights/progress.h"
#include "sparkctl/weights/sha256.h"

namespace spark::weights {

struct CreateManifestOptions {
  std::string dir;
  std::string repository;  // "owner/name"
  std::string revision;
  std::string out_path;  // skipped when it lies inside dir
  bool use_cache = true;  // read and update dir/.sparkctl-verify-cache.json
  int threads = 0;        // 0: every available CPU
  HashOptions hash;
  ProgressOptions progress;
};

// NotFound / FailedPrecondition for a bad dir; DataLoss / PermissionDenied naming the first file
// that could not be read; FailedPrecondition when dir holds no files.
Result<Manifest> CreateManifest(const CreateManifestOptions& options);

}  // namespace spark::weights
