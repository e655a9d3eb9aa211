// The real Transport: libssh sessions to the nodes, one per node, reused for every command
// (a channel per command, an SFTP channel per file) and re-established when dropped.
//
// Authentication is by key only (ssh-agent or NodeSpec::identity_file); host keys are checked
// against NodeSpec::known_hosts (strict, or accept_new for first contact); ~/.ssh/config is
// ignored so that cluster.yaml alone decides. See docs/ssh.md.
// Thread-safety: all methods may be called concurrently. Calls for different nodes run in
// parallel; calls for the same node share its one session and run one after another.
#pragma once

#include <memory>
#include <vector>

#include "base/status.h"
#include "sparkctl/ssh/node.h"
#include "sparkctl/ssh/transport.h"

namespace spark::ssh {

class LibsshTransport final : public Transport {
 public:
  // Returns InvalidArgument for an invalid NodeSpec or a duplicate name. Connects lazily.
  static Result<std::unique_ptr<LibsshTransport>> Create(std::vector<NodeSpec> nodes);
  ~LibsshTransport() override;

  Result<CommandResult> Run(const std::string& node, const std::string& command,
                            const RunOptions& options) override;
  Status Upload(const std::string& node, const std::string& local_path,
                const std::string& remote_path, int mode) override;
  Status WriteFile(const std::string& node, const std::string& remote_path,
                   std::string_view contents, int mode) override;
  Result<std::string> ReadFile(const std::string& node, const std::string& path) override;
  using Transport::Run;

  // Connects to the node now (host key + authentication) instead of at the first command.
  Status Connect(const std::string& node);
  // Closes the node's session; the next call reconnects.
  void Disconnect(const std::string& node);
  // How many times the node's session was established (1 when it was reused throughout).
  int ConnectCount(const std::string& node);

 private:
  struct Node;
  LibsshTransport() = default;
  Result<Node*> Find(const std::string& node);

  std::vector<std::unique_ptr<Node>> nodes_;  // Fixed after Create: lookups need no lock.
};

}  // namespace spark::ssh
