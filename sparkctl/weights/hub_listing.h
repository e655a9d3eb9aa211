// What the Hugging Face Hub says about one pinned repository revision, as the `hf` CLI prints
// it on a node (`hf models info REPO --revision REV --expand sha --json` and `hf models ls REPO
// --revision REV -R --json`), and the checks `weights fetch` makes with it: the revision resolves
// to the commit the profile pins, the profile's manifest describes that commit's files, and a
// manifest made from a download matches the Hub's sizes and LFS SHA-256s.
// Also turns the `hf` CLI's failures (gated, missing repository, unknown revision, no `hf`)
// into errors that name the repository, the revision and the fix.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "sparkctl/weights/manifest.h"

namespace spark::weights {

// The command that installs the Hugging Face CLI on a node (named in every "no hf" error): as
// root it puts `hf` in /usr/local/bin, on the PATH of SSH commands (a --user or pipx install
// lands in ~/.local/bin, which non-interactive SSH shells do not search).
inline constexpr char kHfInstallCommand[] =
    "sudo python3 -m pip install --break-system-packages -U huggingface_hub";

struct HubFile {
  std::string path;
  uint64_t size = 0;
  std::string lfs_sha256;  // empty for files kept in git itself (no SHA-256 from the Hub)
};

struct HubListing {
  std::string repository;
  std::string revision;        // as asked (the profile's pin)
  std::string commit;          // the full commit hash the Hub resolved it to
  std::vector<HubFile> files;  // sorted by path

  uint64_t TotalBytes() const;
};

// Parses the two JSON documents. InvalidArgument naming `source` when either is not what the
// CLI prints; FailedPrecondition ("revision mismatch") when the commit does not start with the
// pinned revision.
Result<HubListing> ParseHubListing(const std::string& repository, const std::string& revision,
                                   const std::string& info_json, const std::string& tree_json,
                                   const std::string& source);

// The error for a failed `hf` command on `node` from its exit status and output: PermissionDenied
// for a gated or private repository (fix: accept the terms, set HF_TOKEN), NotFound for a missing
// repository or revision (fix: model.repository / model.revision in `profile_file`),
// FailedPrecondition for a missing or too old `hf` (fix: kHfInstallCommand), Unavailable
// otherwise (the output's last lines).
Status HubCommandError(const std::string& node, int exit_code, const std::string& output,
                       const std::string& repository, const std::string& revision,
                       const std::string& profile_file);

// Checks a manifest against the Hub's listing of the same revision: same repository, a revision
// the commit starts with, the same set of files, the same sizes, and the LFS SHA-256 wherever the
// Hub has one. FailedPrecondition listing every difference (at most 10 shown) and naming
// `manifest_source`.
Status CheckManifestAgainstHub(const Manifest& manifest, const HubListing& hub,
                               const std::string& manifest_source);

}  // namespace spark::weights
