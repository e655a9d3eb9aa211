// Self-copy: make sure a node has the same sparkctl binary as the controller, so node-side
// operations (`sparkctl node ...` run over SSH) are the very code that planned them.
//
// The file is compared by SHA-256 (OpenSSL here, `sha256sum` on the node) and uploaded only
// when missing or different: to a temporary name, chmod-ed, renamed over the target (atomic,
// so a node never runs a half-written binary), then checked again. Each check leaves a stamp
// beside the file (PATH.stamp: size, mtime, ctime, inode and the hash), so later commands can
// test "still the same file?" in the same round trip that runs it, without reading it.
// Thread-safety: free functions; safe to call for different nodes in parallel.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "sparkctl/ssh/transport.h"

namespace spark::ssh {

// Where the controller installs itself on nodes.
inline constexpr char kDefaultRemoteSelfPath[] = "/usr/local/lib/sparkctl/sparkctl";

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

// A POSIX shell condition, true on the node when remote_path is still the file whose SHA-256
// a check recorded as `sha256`: its stamp matches the file's current size, times and inode.
// False when the file or its stamp is missing, or the file changed after the check.
std::string StampMatchesCondition(const std::string& remote_path, const std::string& sha256);

// SHA-256 of the running binary, computed once per process.
Result<std::string> SelfSha256();

// EnsureFileOnNode for the running binary (/proc/self/exe).
Result<RemoteFile> EnsureSelfOnNode(Transport& transport, const std::string& node,
                                    const std::string& remote_path = kDefaultRemoteSelfPath);

}  // namespace spark::ssh
