// A Transport for tests on one machine: each "node" runs its commands in a local shell, with
// its own copy of the model directory (kDir in a command becomes
// ROOT/<node>/model) and its own loopback address 127.0.0.(i+1) for `weights serve`. Like the
// SSH transport, one command at a time per node.
#pragma once

#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "sparkctl/ssh/transport.h"
#include "tests/sparkctl/weights/weights_test_util.h"

namespace spark::weights::testing {

inline const std::string kDir = "/nonexistent-wsync/model";  // rewritten per node

inline void Replace(std::string* s, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = s->find(from, at)) != std::string::npos; at += to.size()) {
    s->replace(at, from.size(), to);
  }
}

class LocalTransport final : public ssh::Transport {
 public:
  LocalTransport(std::string root, std::vector<std::string> nodes)
      : root_(std::move(root)), nodes_(std::move(nodes)) {}
  std::string NodeDir(const std::string& node) const { return root_ + "/" + node + "/model"; }
  size_t Index(const std::string& node) const {
    return std::find(nodes_.begin(), nodes_.end(), node) - nodes_.begin();
  }
  std::string Address(const std::string& node) const {
    return "127.0.0." + std::to_string(Index(node) + 1);
  }
  std::vector<std::string> commands() {
    std::lock_guard<std::mutex> lock(mu_);
    return commands_;
  }

  // Prepended to a node's commands (e.g. "PATH=/usr/bin:/bin; " for a node without a tool).
  std::map<std::string, std::string> shell_prefix;

  Result<ssh::CommandResult> Run(const std::string& node, const std::string& command,
                                 const ssh::RunOptions& options) override {
    std::string cmd = command;
    if (auto it = shell_prefix.find(node); it != shell_prefix.end()) cmd = it->second + cmd;
    Replace(&cmd, kDir, NodeDir(node));
    Replace(&cmd, " weights serve ", " weights serve --bind " + Address(node) + " ");
    Replace(&cmd, "--from 127.0.0.1:", "--from " + Address(node) + ":");
    {
      std::lock_guard<std::mutex> lock(mu_);
      commands_.push_back(node + ": " + command);
    }
    // Like LibsshTransport: one command at a time per node.
    std::lock_guard<std::mutex> node_lock(node_mu_[Index(node)]);
    std::string base = root_ + "/io-" + std::to_string(counter_++);
    std::ofstream(base + ".in", std::ios::binary) << options.stdin_data;
    int status = std::system(
        ("(" + cmd + ") <" + base + ".in >" + base + ".out 2>" + base + ".err").c_str());
    ssh::CommandResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.stdout_data = ReadBytes(base + ".out");
    r.stderr_data = ReadBytes(base + ".err");
    return r;
  }
  Status Upload(const std::string&, const std::string&, const std::string&, int) override {
    return UnimplementedError("upload");
  }
  Status WriteFile(const std::string&, const std::string&, std::string_view, int) override {
    return UnimplementedError("write");
  }
  Result<std::string> ReadFile(const std::string&, const std::string&) override {
    return UnimplementedError("read");
  }

 private:
  std::string root_;
  std::vector<std::string> nodes_;
  std::mutex mu_;
  std::mutex node_mu_[8];
  std::vector<std::string> commands_;
  std::atomic<int> counter_{0};
};

}  // namespace spark::weights::testing
