// Transport: the one door through which sparkctl reaches its nodes (run a command, copy a file,
// read a file). Everything that talks to a Spark takes a Transport&, so unit tests substitute
// FakeTransport (sparkctl/ssh/testing/fake_transport.h) and the real one is the libssh
// implementation (sparkctl/ssh/libssh_transport.h). Like ninja's CommandRunner.
//
// Nodes are addressed by NodeSpec::name. Error messages start with that name and say why
// ("spark-2: unreachable: 198.18.0.2:22: Connection refused ...").
// Thread-safety: implementations must be safe to call from many threads at once (RunAll does).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace spark::ssh {

struct RunOptions {
  // Deadline for the whole command. Default (unset): the node's command_timeout.
  std::optional<std::chrono::milliseconds> timeout;
  // Written to the command's stdin, then EOF. Default: empty (EOF at once).
  std::string stdin_data;
  // stdout + stderr beyond this fail the command with ResourceExhausted. Default: 256 MiB.
  size_t max_output_bytes = size_t{256} << 20;
};

struct CommandResult {
  // The remote exit status; -1 when the command died from a signal (see exit_signal).
  int exit_code = -1;
  std::string exit_signal;  // "KILL", "SEGV"... when the remote reported one.
  std::string stdout_data;  // Raw bytes, binary-safe.
  std::string stderr_data;
  std::chrono::milliseconds duration{0};

  bool ok() const { return exit_code == 0; }
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Runs `command` with the login shell of the node's user. A non-zero exit is NOT an error
  // here (see RunChecked). Returns NotFound (unknown node), Unavailable (unreachable or the
  // connection dropped), PermissionDenied (authentication), FailedPrecondition (host key
  // unknown or changed), DeadlineExceeded (timeout; the remote command is sent SIGKILL),
  // ResourceExhausted (output over max_output_bytes).
  virtual Result<CommandResult> Run(const std::string& node, const std::string& command,
                                    const RunOptions& options) = 0;

  // Copies a local file to remote_path with permission bits `mode`, atomically: written to a
  // temporary name beside it, chmod-ed, then renamed over remote_path. The remote directory
  // must exist. Returns the connection errors of Run, NotFound (local file or remote dir),
  // PermissionDenied (remote), Internal (other SFTP failures).
  virtual Status Upload(const std::string& node, const std::string& local_path,
                        const std::string& remote_path, int mode) = 0;

  // Writes `contents` to remote_path like Upload does (temp name, chmod, rename).
  virtual Status WriteFile(const std::string& node, const std::string& remote_path,
                           std::string_view contents, int mode) = 0;

  // The whole remote file. Returns NotFound when it does not exist, plus the errors of Run.
  virtual Result<std::string> ReadFile(const std::string& node, const std::string& path) = 0;

  // Shorthand for Run with default options.
  Result<CommandResult> Run(const std::string& node, const std::string& command) {
    return Run(node, command, RunOptions{});
  }
};

// Run, then turn a non-zero exit into Aborted: "spark-1: `cmd` exited with status 2: <stderr
// tail>". Returns the result when the exit status is 0.
Result<CommandResult> RunChecked(Transport& transport, const std::string& node,
                                 const std::string& command, const RunOptions& options = {});

// The error RunChecked returns for a failed command (exported for other transports' callers).
Status CommandFailedError(const std::string& node, const std::string& command,
                          const CommandResult& result);

// The last `max_bytes` of `text` (at a line start when one is near), for error messages.
std::string Tail(std::string_view text, size_t max_bytes = 512);

// 'text' quoted for a POSIX shell: safe for any bytes but NUL.
std::string ShellQuote(std::string_view text);

}  // namespace spark::ssh
