// Copying one file to a node when it differs, and SHA-256 of local files and text. (The programs
// nodes run come from bundles, sparkctl/bundle/deploy.h, which use these hashes.)
//
// The file is compared by SHA-256 (OpenSSL here, `sha256sum` on the node) and uploaded only
// when missing or different: to a temporary name, chmod-ed, renamed over the target (atomic,
// so a node never runs a half-written file), then checked again. Each check leaves a stamp
// beside the file (PATH.stamp: size, mtime, ctime, inode and the hash).
// Thread-safety: free functions; safe to call for different nodes in parallel.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "sparkctl/ssh/transport.h"

namespace spark::ssh {

struct RemoteFile {
  std::string path;       // Remote path.
  std::string sha256;     // Lower-case hex.
  bool uploaded = false;  // False when the node already had this exact file.
};

// Hex SHA-256 of a local file. Returns the ErrnoError of open/read.
Result<std::string> Sha256File(const std::string& path);

// Hex SHA-256 of `text`.
std::string Sha256Text(std::string_view text);

// Hex SHA-256 of the remote file, or "" when it does not exist. Errors of Run; Aborted when
// sha256sum fails for another reason.
Result<std::string> RemoteSha256(Transport& transport, const std::string& node,
                                 const std::string& remote_path);

// Uploads local_path to remote_path (creating its directory, mode `mode`) unless the node
// already has a file with the same SHA-256. DataLoss when the checksum after upload differs.
Result<RemoteFile> EnsureFileOnNode(Transport& transport, const std::string& node,
                                    const std::string& local_path, const std::string& remote_path,
                                    int mode = 0755);


}  // namespace spark::ssh
