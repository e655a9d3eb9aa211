// FakeTransport: a Transport for other modules' unit tests. Tests register canned replies per
// node and command pattern, a file system per node, and dead nodes; the fake records every
// call so tests can assert what was run where.
//
//   FakeTransport fake({"spark-1", "spark-2"});
//   fake.Reply("*", "uname -r", "6.11.0-1016-nvidia\n");
//   fake.OnCommand("spark-2", "cat /proc/meminfo", NotFoundError("..."));
//   fake.SetNodeDown("spark-3", UnavailableError("spark-3: unreachable: ..."));
//   fake.SetFile("spark-1", "/etc/os-release", "ID=ubuntu\n");
//
// Matching: node is an exact name or "*"; the pattern is an ECMAScript regex that must match
// the whole command. The most recently registered matching rule wins, so a test can override
// a fixture's defaults. A command without a rule fails with Unimplemented naming it.
// Thread-safety: all methods may be called concurrently (RunAll calls Run from many threads).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "sparkctl/ssh/transport.h"

namespace spark::ssh::testing {

class FakeTransport final : public Transport {
 public:
  using Handler =
      std::function<Result<CommandResult>(const std::string& node, const std::string& command)>;
  struct Call {
    std::string node;
    std::string command;  // For files: "upload <remote>", "write <remote>", "read <path>".
  };

  // With no names, any node name is accepted; otherwise others fail with NotFound.
  explicit FakeTransport(std::vector<std::string> nodes = {});

  void OnCommand(const std::string& node, const std::string& pattern, CommandResult result);
  void OnCommand(const std::string& node, const std::string& pattern, Status error);
  void OnCommand(const std::string& node, const std::string& pattern, Handler handler);
  // Exit status `exit_code` with the given stdout.
  void Reply(const std::string& node, const std::string& pattern, std::string stdout_data,
             int exit_code = 0);
  // Every call for the node fails with `error` (Status::Ok() brings it back).
  void SetNodeDown(const std::string& node, Status error);

  void SetFile(const std::string& node, const std::string& path, std::string contents,
               int mode = 0644);
  void RemoveFile(const std::string& node, const std::string& path);
  std::optional<std::string> GetFile(const std::string& node, const std::string& path) const;
  std::optional<int> GetFileMode(const std::string& node, const std::string& path) const;

  std::vector<Call> calls() const;
  // The commands run on one node, in order.
  std::vector<std::string> CommandsOn(const std::string& node) const;
  void ClearCalls();

  Result<CommandResult> Run(const std::string& node, const std::string& command,
                            const RunOptions& options) override;
  Status Upload(const std::string& node, const std::string& local_path,
                const std::string& remote_path, int mode) override;
  Status WriteFile(const std::string& node, const std::string& remote_path,
                   std::string_view contents, int mode) override;
  Result<std::string> ReadFile(const std::string& node, const std::string& path) override;
  using Transport::Run;

 private:
  struct Rule {
    std::string node;
    std::regex pattern;
    std::string pattern_text;
    Handler handler;
  };
  struct File {
    std::string contents;
    int mode = 0644;
  };
  // Records the call and returns the node's error (unknown / down) or OK.
  Status Enter(const std::string& node, const std::string& what);

  mutable std::mutex mu_;
  std::vector<std::string> nodes_;
  std::vector<Rule> rules_;
  std::map<std::string, Status> down_;
  std::map<std::pair<std::string, std::string>, File> files_;
  std::vector<Call> calls_;
};

}  // namespace spark::ssh::testing
