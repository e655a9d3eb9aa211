// SshdServer: a real OpenSSH sshd for the transport's tests, on 127.0.0.1 and a free high
// port, with its own temporary host key, PidFile, log and an authorized_keys that holds a
// temporary client key. Needs root (sshd -D runs sessions as root) and /usr/sbin/sshd.
// Thread-safety: none; one test thread drives it.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/status.h"

namespace spark::ssh::testing {

// Runs `command` with /bin/sh; returns its stdout, or Internal with its output on failure.
Result<std::string> Shell(const std::string& command);

// A TCP port on 127.0.0.1 that nothing listens on right now.
Result<int> FreePort();

class SshdServer {
 public:
  // Why the sshd tests cannot run here ("" when they can).
  static std::string SkipReason();

  // Keys and config in a fresh directory under `parent`; sshd is not started yet.
  static Result<SshdServer> Prepare(const std::string& parent);
  ~SshdServer();
  SshdServer(SshdServer&& other) noexcept;
  SshdServer& operator=(SshdServer&&) = delete;

  // `sshd -t` and `sshd -T` on the config: Internal with sshd's complaint when invalid.
  Status CheckConfig() const;
  // Starts sshd -D and waits until it sends its banner (5 s).
  Status Start();
  void Stop();
  // Stops, replaces the host key with a new one, starts again on the same port.
  Status RestartWithNewHostKey();

  int port() const { return port_; }
  const std::string& dir() const { return dir_; }
  std::string client_key() const { return dir_ + "/client_ed25519"; }
  std::string host_key() const { return dir_ + "/host_ed25519"; }
  // "SHA256:..." of the current host key, from ssh-keygen -l.
  Result<std::string> HostFingerprint() const;
  // sshd's log so far (LogLevel VERBOSE).
  std::string Log() const;

 private:
  SshdServer() = default;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace spark::ssh::testing
