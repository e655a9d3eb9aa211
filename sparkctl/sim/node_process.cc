#include "sparkctl/sim/node_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

#include "base/strings.h"
#include "sparkctl/sim/node_image.h"

namespace spark::sim {
namespace {

using Clock = std::chrono::steady_clock;

std::string FindTool(const char* name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    std::string path = std::string(dir) + name;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return name;
}

std::string Tail(const std::string& path) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return "";
  std::string t(Trim(*text));
  return t.size() > 600 ? "..." + t.substr(t.size() - 600) : t;
}

// Double fork: the holder belongs to no one's session and is reparented to init, so neither a
// crash nor Ctrl-C of sparkctl takes the node down, and no zombie is left with the caller.
Result<pid_t> SpawnDetached(const std::vector<std::string>& argv, int out_fd, int err_fd) {
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) return ErrnoError(errno, "/dev/null");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t child = fork();
  if (child < 0) {
    close(devnull);
    return ErrnoError(errno, "fork");
  }
  if (child == 0) {
    setsid();
    if (fork() != 0) _exit(0);
    dup2(devnull, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    execv(args[0], args.data());
    _exit(127);
  }
  close(devnull);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return child;
}

// Reads lines from fd until one starts with "ready ", EOF, or the deadline.
Result<int> ReadReady(int fd, int timeout_ms) {
  std::string buffer;
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    size_t pos = buffer.find("ready ");
    size_t nl = pos == std::string::npos ? pos : buffer.find('\n', pos);
    if (nl != std::string::npos) {
      std::optional<int64_t> pid = ParseInt(Trim(buffer.substr(pos + 6, nl - pos - 6)));
      if (pid) return static_cast<int>(*pid);
    }
    int left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return DeadlineExceededError("node setup did not finish in time");
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, left) < 0 && errno != EINTR) return ErrnoError(errno, "poll");
    char chunk[256];
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n == 0) return InternalError("node setup exited early");
    if (n > 0) buffer.append(chunk, n);
  }
}

}  // namespace

Result<int> StartHolder(const std::string& netns, const std::string& setup_script,
                        const std::string& log_path) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoError(errno, "pipe");
  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    close(fds[0]), close(fds[1]);
    return ErrnoError(errno, log_path);
  }
  Result<pid_t> spawned = SpawnDetached({FindTool("ip"), "netns", "exec", netns, "unshare",
                                         "--uts", "--mount", "--propagation", "private",
                                         "/bin/sh", setup_script},
                                        fds[1], log_fd);
  close(fds[1]);
  close(log_fd);
  Result<int> pid = spawned.ok() ? ReadReady(fds[0], 20000) : Result<int>(spawned.status());
  close(fds[0]);
  if (pid.ok()) return pid;
  return InternalError(netns + ": " + pid.status().message() + "; " + log_path + ": " +
                       Tail(log_path));
}

std::vector<std::string> InNode(const NodeState& node, const std::vector<std::string>& command) {
  std::vector<std::string> argv = {"nsenter", "-t", std::to_string(node.holder_pid),
                                   "-n",      "-m", "-u", "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

Status StartSshd(Runner& runner, const std::string& cluster_dir, const NodeState& node) {
  SPARK_ASSIGN_OR_RETURN(std::string limit, MemlockPrlimitArg(node.facts.memlock));
  const std::string dir = NodeDir(cluster_dir, node);
  Status s = RunOk(runner, InNode(node, {"prlimit", "--memlock=" + limit, FindTool("sshd"), "-f",
                                         dir + "/ssh/sshd_config", "-E", dir + "/log/sshd.log"}));
  if (s.ok()) s = WaitForTcp(node.mgmt_address, 22, 10000);
  if (s.ok()) return s;
  return s.WithContext(node.name + ": sshd (log: " + dir + "/log/sshd.log: " +
                       Tail(dir + "/log/sshd.log") + ")");
}

Status StopSshd(const std::string& cluster_dir, const NodeState& node) {
  const std::string pid_file = NodeDir(cluster_dir, node) + "/sshd.pid";
  Result<std::string> text = ReadFile(pid_file);
  std::optional<int64_t> pid = text.ok() ? ParseInt(Trim(*text)) : std::nullopt;
  if (!pid || !ProcessAlive(*pid)) return Status::Ok();
  if (kill(*pid, SIGTERM) != 0) return ErrnoError(errno, node.name + ": kill sshd");
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (ProcessAlive(*pid) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  unlink(pid_file.c_str());
  if (ProcessAlive(*pid)) return DeadlineExceededError(node.name + ": sshd did not stop");
  return Status::Ok();
}

Status WaitForTcp(const std::string& address, int port, int timeout_ms) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1)
    return InvalidArgumentError("bad IPv4 address " + address);
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return ErrnoError(errno, "socket");
    int rc = connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    close(fd);
    if (rc == 0) return Status::Ok();
    if (Clock::now() > deadline)
      return DeadlineExceededError(address + ":" + std::to_string(port) + " does not accept "
                                   "connections");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::vector<int> NetnsPids(Runner& runner, const std::string& netns) {
  std::vector<int> pids;
  Result<std::string> out = RunOutput(runner, {"ip", "netns", "pids", netns});
  if (!out.ok()) return pids;
  for (const std::string& line : Split(*out, '\n', true))
    if (std::optional<int64_t> pid = ParseInt(Trim(line))) pids.push_back(*pid);
  return pids;
}

Status KillNetnsProcesses(Runner& runner, const std::string& netns) {
  for (int round = 0; round < 200; ++round) {
    std::vector<int> pids = NetnsPids(runner, netns);
    if (pids.empty()) return Status::Ok();
    for (int pid : pids) kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return DeadlineExceededError("processes in " + netns + " survive SIGKILL; see `ip netns pids " +
                               netns + "`");
}

Result<int> KillMatching(Runner& runner, const NodeState& node, const std::string& pattern) {
  int killed = 0;
  for (int pid : NetnsPids(runner, node.netns)) {
    if (pid == node.holder_pid) continue;
    Result<std::string> cmdline = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
    if (!cmdline.ok()) continue;
    std::replace(cmdline->begin(), cmdline->end(), '\0', ' ');
    if (cmdline->find(pattern) == std::string::npos) continue;
    if (kill(pid, SIGKILL) == 0) ++killed;
  }
  return killed;
}

bool ProcessAlive(int pid) {
  Result<std::string> stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return false;
  size_t paren = stat->rfind(')');
  return paren != std::string::npos && paren + 2 < stat->size() && (*stat)[paren + 2] != 'Z';
}

}  // namespace spark::sim
