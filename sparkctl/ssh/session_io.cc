// Session: commands over exec channels and files over SFTP.
#include <fcntl.h>
#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <libssh/sftp.h>

#include <algorithm>
#include <array>
#include <random>

#include "base/logging.h"
#include "sparkctl/ssh/session.h"

namespace spark::ssh {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kChunk = 64 * 1024;
constexpr int kIdlePollMs = 20;

struct ChannelCloser {
  void operator()(ssh_channel channel) const {
    if (ssh_channel_is_open(channel)) ssh_channel_close(channel);
    ssh_channel_free(channel);
  }
};
using ChannelPtr = std::unique_ptr<ssh_channel_struct, ChannelCloser>;

struct SftpCloser {
  void operator()(sftp_session sftp) const { sftp_free(sftp); }
};
using SftpPtr = std::unique_ptr<sftp_session_struct, SftpCloser>;

struct FileCloser {
  void operator()(sftp_file file) const { sftp_close(file); }
};
using FilePtr = std::unique_ptr<sftp_file_struct, FileCloser>;

void OnExitSignal(ssh_session, ssh_channel, const char* signal, int, const char*, const char*,
                  void* userdata) {
  static_cast<CommandResult*>(userdata)->exit_signal = signal != nullptr ? signal : "?";
}

std::string RunId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char id[20];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(rng()));
  return id;
}

std::string TempName(const std::string& path) { return path + ".sparkctl-tmp-" + RunId(); }

std::chrono::milliseconds Elapsed(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

}  // namespace

Status Session::ConnectionLost(const std::string& what) {
  Status status = UnavailableError(spec_.name + ": connection to " + spec_.Target() +
                                   " lost while " + what + ": " + Error());
  broken_ = true;
  return status;
}

// A channel on a session that was dropped while idle cannot be opened; reconnect once. Nothing
// was sent yet, so the retry is safe.
Result<ssh_channel> Session::OpenChannel() {
  for (int attempt = 0;; ++attempt) {
    SPARK_RETURN_IF_ERROR(EnsureConnected());
    ssh_channel channel = ssh_channel_new(session_);
    if (channel != nullptr && ssh_channel_open_session(channel) == SSH_OK) return channel;
    if (channel != nullptr) ssh_channel_free(channel);
    if (attempt > 0) return ConnectionLost("opening a channel");
    Logger("ssh")->info("{}: session dropped ({}); reconnecting", spec_.name, Error());
    Disconnect();
  }
}

Result<sftp_session> Session::OpenSftp() {
  for (int attempt = 0;; ++attempt) {
    SPARK_RETURN_IF_ERROR(EnsureConnected());
    sftp_session sftp = sftp_new(session_);
    if (sftp != nullptr && sftp_init(sftp) == SSH_OK) return sftp;
    if (sftp != nullptr) sftp_free(sftp);
    if (connected()) {
      return UnavailableError(spec_.name + ": SFTP is not available on " + spec_.Target() + ": " +
                              Error() + " (sshd_config needs 'Subsystem sftp internal-sftp')");
    }
    if (attempt > 0) return ConnectionLost("starting SFTP");
    Logger("ssh")->info("{}: session dropped ({}); reconnecting", spec_.name, Error());
    Disconnect();
  }
}

Result<CommandResult> Session::Exec(const std::string& command, const RunOptions& options) {
  // The marker lets a timeout find and kill every process the command started (sshd cannot
  // signal root sessions, and closing the channel does not stop a command that ignores it).
  const std::string run_id = RunId();
  Result<CommandResult> result =
      ExecOnce("export SPARKCTL_RUN_ID=" + run_id + "; " + command, command, options);
  if (result.status().code() != StatusCode::kDeadlineExceeded || !connected()) return result;
  Status killed = KillRun(run_id);
  if (killed.ok()) return result;
  return DeadlineExceededError(result.status().message() +
                               " The command may still run on the node: " + killed.message());
}

Status Session::KillRun(const std::string& run_id) {
  RunOptions options;
  options.timeout = std::min(spec_.connect_timeout, std::chrono::milliseconds(3000));
  const std::string sweep = "for f in $(grep -slaz '^SPARKCTL_RUN_ID=" + run_id +
                            "$' /proc/[0-9]*/environ); do p=${f#/proc/}; "
                            "kill -KILL \"${p%/environ}\" 2>/dev/null; done; true";
  SPARK_ASSIGN_OR_RETURN(CommandResult swept, ExecOnce(sweep, "kill sweep", options));
  if (swept.exit_code != 0) return CommandFailedError(spec_.name, "kill sweep", swept);
  return Status::Ok();
}

Result<CommandResult> Session::ExecOnce(const std::string& wire_command, const std::string& command,
                                        const RunOptions& options) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + options.timeout.value_or(spec_.command_timeout);
  CommandResult result;
  SPARK_ASSIGN_OR_RETURN(ssh_channel raw, OpenChannel());
  ChannelPtr channel(raw);
  ssh_channel_callbacks_struct callbacks{};
  ssh_callbacks_init(&callbacks);
  callbacks.userdata = &result;
  callbacks.channel_exit_signal_function = OnExitSignal;
  ssh_set_channel_callbacks(channel.get(), &callbacks);
  if (ssh_channel_request_exec(channel.get(), wire_command.c_str()) != SSH_OK) {
    return ConnectionLost("starting `" + command + "`");
  }
  if (!options.stdin_data.empty() &&
      ssh_channel_write(channel.get(), options.stdin_data.data(),
                        static_cast<uint32_t>(options.stdin_data.size())) == SSH_ERROR) {
    return ConnectionLost("writing stdin of `" + command + "`");
  }
  ssh_channel_send_eof(channel.get());
  SPARK_RETURN_IF_ERROR(ReadOutput(channel.get(), command, deadline, options, result));
  result.duration = Elapsed(start);
  result.exit_code = ssh_channel_get_exit_status(channel.get());
  if (result.exit_code < 0 && result.exit_signal.empty() && !connected()) {
    return ConnectionLost("waiting for the exit status of `" + command + "`");
  }
  return result;
}

// Drains stdout and stderr until both reach EOF, the deadline passes or the output grows past
// the limit.
Status Session::ReadOutput(ssh_channel channel, const std::string& command,
                           Clock::time_point deadline, const RunOptions& options,
                           CommandResult& result) {
  std::array<char, kChunk> buf;
  std::string* sinks[2] = {&result.stdout_data, &result.stderr_data};
  bool eof[2] = {false, false};
  while (!eof[0] || !eof[1]) {
    bool progressed = false;
    for (int stream = 0; stream < 2; ++stream) {
      if (eof[stream]) continue;
      int n = ssh_channel_read_nonblocking(channel, buf.data(), buf.size(), stream);
      if (n == SSH_ERROR) return ConnectionLost("running `" + command + "`");
      if (n == SSH_EOF ||
          (n == 0 && ssh_channel_is_eof(channel) && ssh_channel_poll(channel, stream) <= 0)) {
        eof[stream] = true;
      } else if (n > 0) {
        sinks[stream]->append(buf.data(), static_cast<size_t>(n));
        progressed = true;
      }
    }
    if (result.stdout_data.size() + result.stderr_data.size() > options.max_output_bytes) {
      return ResourceExhaustedError(spec_.name + ": `" + command + "` wrote more than " +
                                    std::to_string(options.max_output_bytes) + " bytes");
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return DeadlineExceededError(
          spec_.name + ": `" + command + "` did not finish within " +
          std::to_string(options.timeout.value_or(spec_.command_timeout).count()) +
          " ms (killed). Output so far: " + Tail(result.stdout_data + result.stderr_data));
    }
    if (!progressed && (!eof[0] || !eof[1])) {
      int wait_ms = static_cast<int>(std::min<int64_t>(left.count(), kIdlePollMs));
      if (ssh_channel_poll_timeout(channel, wait_ms, 0) == SSH_ERROR) {
        return ConnectionLost("running `" + command + "`");
      }
    }
  }
  return Status::Ok();
}

Status Session::SftpError(sftp_session sftp, const std::string& what, const std::string& path) {
  const std::string message = spec_.name + ": cannot " + what + " " + path + " (sftp error " +
                              std::to_string(sftp_get_error(sftp)) + "): " + Error();
  switch (sftp_get_error(sftp)) {
    case SSH_FX_NO_SUCH_FILE:
    case SSH_FX_NO_SUCH_PATH:
      return NotFoundError(message);
    case SSH_FX_PERMISSION_DENIED:
    case SSH_FX_WRITE_PROTECT:
      return PermissionDeniedError(message);
    case SSH_FX_NO_CONNECTION:
    case SSH_FX_CONNECTION_LOST:
      return ConnectionLost(what + " " + path);
    default:
      break;
  }
  if (!connected()) return ConnectionLost(what + " " + path);
  return InternalError(message);
}

Status Session::PutFile(const ChunkReader& reader, const std::string& remote_path, int mode) {
  SPARK_ASSIGN_OR_RETURN(sftp_session raw, OpenSftp());
  SftpPtr sftp(raw);
  const std::string temp = TempName(remote_path);
  FilePtr file(sftp_open(sftp.get(), temp.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600));
  if (file == nullptr) return SftpError(sftp.get(), "create", temp);
  std::array<char, kChunk> buf;
  Status status;
  while (status.ok()) {
    Result<size_t> n = reader(buf.data(), buf.size());
    if (!n.ok() || *n == 0) {
      status = n.status();
      break;
    }
    if (sftp_write(file.get(), buf.data(), *n) != static_cast<ssize_t>(*n)) {
      status = SftpError(sftp.get(), "write", temp);
    }
  }
  if (status.ok() && sftp_close(file.release()) != SSH_OK)
    status = SftpError(sftp.get(), "close", temp);
  if (status.ok() && sftp_chmod(sftp.get(), temp.c_str(), static_cast<mode_t>(mode)) != SSH_OK) {
    status = SftpError(sftp.get(), "chmod", temp);
  }
  if (status.ok()) status = ReplaceRemote(temp, remote_path);
  if (!status.ok() && connected()) sftp_unlink(sftp.get(), temp.c_str());
  return status;
}

// SFTP's rename refuses an existing target and libssh 0.10 has no posix-rename call, so the
// final step is mv(1): rename(2) in the same directory, atomic, replaces the old file.
Status Session::ReplaceRemote(const std::string& temp, const std::string& remote_path) {
  const std::string command = "mv -f -- " + ShellQuote(temp) + " " + ShellQuote(remote_path);
  RunOptions options;
  options.timeout = std::max(spec_.connect_timeout, std::chrono::milliseconds(30'000));
  SPARK_ASSIGN_OR_RETURN(CommandResult moved, ExecOnce(command, command, options));
  if (!moved.ok()) return CommandFailedError(spec_.name, command, moved);
  return Status::Ok();
}

Result<std::string> Session::GetFile(const std::string& remote_path) {
  SPARK_ASSIGN_OR_RETURN(sftp_session raw, OpenSftp());
  SftpPtr sftp(raw);
  FilePtr file(sftp_open(sftp.get(), remote_path.c_str(), O_RDONLY, 0));
  if (file == nullptr) return SftpError(sftp.get(), "open", remote_path);
  std::string contents;
  std::array<char, kChunk> buf;
  for (;;) {
    ssize_t n = sftp_read(file.get(), buf.data(), buf.size());
    if (n < 0) return SftpError(sftp.get(), "read", remote_path);
    if (n == 0) break;
    contents.append(buf.data(), static_cast<size_t>(n));
  }
  return contents;
}

}  // namespace spark::ssh
