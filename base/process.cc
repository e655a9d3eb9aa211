#include "base/process.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <ctime>

#include "base/strings.h"

extern char** environ;

namespace spark {
namespace {

struct Pipes {
  std::array<int, 2> in{-1, -1}, out{-1, -1}, err{-1, -1};
  void CloseAll() {
    for (int* fd : {&in[0], &in[1], &out[0], &out[1], &err[0], &err[1]})
      if (*fd >= 0) close(*fd), *fd = -1;
  }
};

Result<pid_t> Spawn(const std::vector<std::string>& argv, Pipes& p) {
  for (auto* pair : {&p.in, &p.out, &p.err})
    if (pipe2(pair->data(), O_CLOEXEC) != 0) return ErrnoError(errno, "pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, p.in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, p.out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, p.err[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  for (int* fd : {&p.in[0], &p.out[1], &p.err[1]}) close(*fd), *fd = -1;
  if (rc != 0) return ErrnoError(rc, "cannot start '" + argv[0] + "'");
  return pid;
}

// write() that turns a closed reader into EPIPE without SIGPIPE killing the process: the signal
// is blocked for this thread and a pending one is consumed.
ssize_t WriteNoSigpipe(int fd, const char* data, size_t size) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  ssize_t n = write(fd, data, size);
  if (n < 0 && errno == EPIPE) {
    timespec zero{};
    sigtimedwait(&pipe_set, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return n;
}

// Feeds stdin and drains stdout/stderr until both close.
void Pump(Pipes& p, std::string_view input, CommandResult& result) {
  size_t written = 0;
  if (input.empty()) close(p.in[1]), p.in[1] = -1;
  char buf[16384];
  while (p.out[0] >= 0 || p.err[0] >= 0 || p.in[1] >= 0) {
    pollfd fds[3] = {{p.out[0], POLLIN, 0}, {p.err[0], POLLIN, 0}, {p.in[1], POLLOUT, 0}};
    if (poll(fds, 3, -1) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) (i == 0 ? result.out : result.err).append(buf, n);
      if (n == 0 || (n < 0 && errno != EINTR)) close(fds[i].fd), (i == 0 ? p.out[0] : p.err[0]) = -1;
    }
    if (fds[2].fd >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t n = WriteNoSigpipe(p.in[1], input.data() + written, input.size() - written);
      if (n > 0) written += n;
      if (n < 0 || written == input.size()) close(p.in[1]), p.in[1] = -1;
    }
  }
}

std::string Describe(const std::vector<std::string>& argv) { return Join(argv, " "); }

}  // namespace

Result<CommandResult> ProcessRunner::Run(const std::vector<std::string>& argv,
                                         std::string_view input) {
  if (argv.empty()) return InvalidArgumentError("empty command line");
  Pipes pipes;
  Result<pid_t> pid = Spawn(argv, pipes);
  if (!pid.ok()) {
    pipes.CloseAll();
    return pid.status();
  }
  CommandResult result;
  Pump(pipes, input, result);
  pipes.CloseAll();
  int status = 0;
  while (waitpid(*pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

Result<int> RunInherited(const std::vector<std::string>& argv) {
  if (argv.empty()) return InvalidArgumentError("empty command line");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ);
  if (rc != 0) return ErrnoError(rc, "cannot start '" + argv[0] + "'");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Result<std::string> RunOutput(Runner& runner, const std::vector<std::string>& argv,
                              std::string_view input) {
  SPARK_ASSIGN_OR_RETURN(CommandResult r, runner.Run(argv, input));
  if (r.exit_code == 0) return std::move(r.out);
  std::string err(Trim(r.err.empty() ? r.out : r.err));
  return InternalError("'" + Describe(argv) + "' exited with " + std::to_string(r.exit_code) +
                       (err.empty() ? "" : ": " + err));
}

Status RunOk(Runner& runner, const std::vector<std::string>& argv, std::string_view input) {
  return RunOutput(runner, argv, input).status();
}

}  // namespace spark
