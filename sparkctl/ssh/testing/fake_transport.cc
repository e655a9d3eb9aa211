#include "sparkctl/ssh/testing/fake_transport.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "base/strings.h"

namespace spark::ssh::testing {

FakeTransport::FakeTransport(std::vector<std::string> nodes) : nodes_(std::move(nodes)) {}

void FakeTransport::OnCommand(const std::string& node, const std::string& pattern,
                              CommandResult result) {
  OnCommand(node, pattern, [result](const std::string&, const std::string&) {
    return Result<CommandResult>(result);
  });
}

void FakeTransport::OnCommand(const std::string& node, const std::string& pattern, Status error) {
  if (error.ok()) error = InternalError("FakeTransport: OnCommand given an OK status");
  OnCommand(node, pattern, [error](const std::string&, const std::string&) {
    return Result<CommandResult>(error);
  });
}

void FakeTransport::OnCommand(const std::string& node, const std::string& pattern,
                              Handler handler) {
  std::lock_guard lock(mu_);
  rules_.push_back(Rule{node, std::regex(pattern), pattern, std::move(handler)});
}

void FakeTransport::Reply(const std::string& node, const std::string& pattern,
                          std::string stdout_data, int exit_code) {
  CommandResult result;
  result.exit_code = exit_code;
  result.stdout_data = std::move(stdout_data);
  OnCommand(node, pattern, std::move(result));
}

void FakeTransport::SetNodeDown(const std::string& node, Status error) {
  std::lock_guard lock(mu_);
  if (error.ok()) {
    down_.erase(node);
  } else {
    down_[node] = std::move(error);
  }
}

void FakeTransport::SetFile(const std::string& node, const std::string& path, std::string contents,
                            int mode) {
  std::lock_guard lock(mu_);
  files_[{node, path}] = File{std::move(contents), mode};
}

void FakeTransport::RemoveFile(const std::string& node, const std::string& path) {
  std::lock_guard lock(mu_);
  files_.erase({node, path});
}

std::optional<std::string> FakeTransport::GetFile(const std::string& node,
                                                  const std::string& path) const {
  std::lock_guard lock(mu_);
  auto it = files_.find({node, path});
  if (it == files_.end()) return std::nullopt;
  return it->second.contents;
}

std::optional<int> FakeTransport::GetFileMode(const std::string& node,
                                              const std::string& path) const {
  std::lock_guard lock(mu_);
  auto it = files_.find({node, path});
  if (it == files_.end()) return std::nullopt;
  return it->second.mode;
}

std::vector<FakeTransport::Call> FakeTransport::calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

std::vector<std::string> FakeTransport::CommandsOn(const std::string& node) const {
  std::lock_guard lock(mu_);
  std::vector<std::string> commands;
  for (const Call& call : calls_) {
    if (call.node == node) commands.push_back(call.command);
  }
  return commands;
}

void FakeTransport::ClearCalls() {
  std::lock_guard lock(mu_);
  calls_.clear();
}

Status FakeTransport::Enter(const std::string& node, const std::string& what) {
  std::lock_guard lock(mu_);
  calls_.push_back(Call{node, what});
  if (!nodes_.empty() && std::find(nodes_.begin(), nodes_.end(), node) == nodes_.end()) {
    return NotFoundError("unknown node '" + node + "'" + DidYouMean(node, nodes_));
  }
  auto down = down_.find(node);
  return down == down_.end() ? Status::Ok() : down->second;
}

Result<CommandResult> FakeTransport::Run(const std::string& node, const std::string& command,
                                         const RunOptions& /*options*/) {
  SPARK_RETURN_IF_ERROR(Enter(node, command));
  Handler handler;
  {
    std::lock_guard lock(mu_);
    for (auto it = rules_.rbegin(); it != rules_.rend(); ++it) {
      if ((it->node == "*" || it->node == node) && std::regex_match(command, it->pattern)) {
        handler = it->handler;
        break;
      }
    }
  }
  if (!handler) {
    return UnimplementedError("FakeTransport: no canned reply for `" + command + "` on " + node);
  }
  return handler(node, command);  // Outside the lock: handlers may call back into the fake.
}

Status FakeTransport::Upload(const std::string& node, const std::string& local_path,
                             const std::string& remote_path, int mode) {
  SPARK_RETURN_IF_ERROR(Enter(node, "upload " + remote_path));
  std::ifstream in(local_path, std::ios::binary);
  if (!in) return NotFoundError(node + ": cannot upload " + local_path + ": cannot open it");
  std::ostringstream contents;
  contents << in.rdbuf();
  SetFile(node, remote_path, contents.str(), mode);
  return Status::Ok();
}

Status FakeTransport::WriteFile(const std::string& node, const std::string& remote_path,
                                std::string_view contents, int mode) {
  SPARK_RETURN_IF_ERROR(Enter(node, "write " + remote_path));
  SetFile(node, remote_path, std::string(contents), mode);
  return Status::Ok();
}

Result<std::string> FakeTransport::ReadFile(const std::string& node, const std::string& path) {
  SPARK_RETURN_IF_ERROR(Enter(node, "read " + path));
  std::optional<std::string> contents = GetFile(node, path);
  if (!contents) return NotFoundError(node + ": " + path + ": no such file");
  return *std::move(contents);
}

}  // namespace spark::ssh::testing
