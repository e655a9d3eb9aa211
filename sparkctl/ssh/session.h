// Session: one libssh connection to one node — connect, host-key check, key authentication,
// then a channel per command and an SFTP channel per file transfer. Internal to the libssh
// transport (libssh_transport.cc); other code uses the Transport interface.
//
// A session reconnects by itself when its connection was dropped while idle (a channel that
// cannot be opened on an established session triggers one reconnect). A connection lost in the
// middle of a command is reported (Unavailable), never retried: the command may have run.
// Thread-safety: NOT thread-safe (libssh sessions are not); the transport serialises the calls
// to one session with a per-node mutex.
#pragma once

#include <functional>
#include <string>

#include "base/status.h"
#include "sparkctl/ssh/node.h"
#include "sparkctl/ssh/transport.h"

struct ssh_session_struct;
struct ssh_channel_struct;
struct sftp_session_struct;

namespace spark::ssh {

// Fills buf with up to cap bytes; returns 0 at the end of the data.
using ChunkReader = std::function<Result<size_t>(char* buf, size_t cap)>;

class Session {
 public:
  explicit Session(NodeSpec spec);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const NodeSpec& spec() const { return spec_; }
  bool connected() const;
  // How many times this session has (re)connected; for tests and logs.
  int connect_count() const { return connect_count_; }

  // Connects, checks the host key and authenticates, unless already connected.
  Status EnsureConnected();
  void Disconnect();

  Result<CommandResult> Exec(const std::string& command, const RunOptions& options);
  // Writes the reader's bytes to remote_path (temp name, chmod, rename).
  Status PutFile(const ChunkReader& reader, const std::string& remote_path, int mode);
  Result<std::string> GetFile(const std::string& remote_path);

 private:
  Status Connect();
  Status VerifyHostKey();
  Status Authenticate();
  Result<ssh_channel_struct*> OpenChannel();
  Result<sftp_session_struct*> OpenSftp();
  // Exec without the timeout clean-up; `command` is the name used in messages.
  Result<CommandResult> ExecOnce(const std::string& wire_command, const std::string& command,
                                 const RunOptions& options);
  // mv -f temp remote_path on the node.
  Status ReplaceRemote(const std::string& temp, const std::string& remote_path);
  // Kills every process on the node whose environment carries SPARKCTL_RUN_ID=run_id.
  Status KillRun(const std::string& run_id);
  Status ReadOutput(ssh_channel_struct* channel, const std::string& command,
                    std::chrono::steady_clock::time_point deadline, const RunOptions& options,
                    CommandResult& result);
  // Unavailable "<node>: connection lost while <what>: <libssh error>"; marks the session
  // broken so that the next call reconnects.
  Status ConnectionLost(const std::string& what);
  Status SftpError(sftp_session_struct* sftp, const std::string& what, const std::string& path);
  std::string Error() const;

  NodeSpec spec_;
  ssh_session_struct* session_ = nullptr;
  // Set when the connection broke while channels or SFTP handles may still point into
  // session_; it is freed at the start of the next call, never under a live channel.
  bool broken_ = false;
  int connect_count_ = 0;
};

}  // namespace spark::ssh
