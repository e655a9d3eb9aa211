// Starting the ranks of a collective benchmark locally or on the cluster (see launch.h).
#include "sparkctl/bench/launch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>

#include "netplan/oneshot_links.h"
#include "sparkctl/ssh/parallel.h"
#include "sparkctl/bundle/deploy.h"

namespace spark::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool Bindable(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

// A port P with P and P+1 free on 127.0.0.1 (the bench rendezvous and Gloo's). Chosen below the
// kernel's ephemeral range (32768 and up) so that no outgoing connection of another process
// takes it between this check and rank 0's bind.
Result<int> FreeLoopbackPort() {
  unsigned seed = static_cast<unsigned>(getpid()) * 2654435761u ^
                  static_cast<unsigned>(Clock::now().time_since_epoch().count());
  for (int attempt = 0; attempt < 200; ++attempt) {
    seed = seed * 1103515245u + 12345u;
    int port = 20000 + static_cast<int>((seed >> 8) % 12000);
    if (Bindable(port) && Bindable(port + 1)) return port;
  }
  return UnavailableError("no two free adjacent TCP ports on 127.0.0.1 in 20000-32000 for the "
                          "rendezvous");
}

// fork+exec one rank; stdout goes to `stdout_fd` (or /dev/null when -1).
Result<pid_t> Spawn(const std::vector<std::string>& argv, int stdout_fd) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return ErrnoError(errno, "fork");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    int out = stdout_fd >= 0 ? stdout_fd : open("/dev/null", O_WRONLY);
    dup2(out, STDOUT_FILENO);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    std::fprintf(stderr, "spark-bench: cannot execute %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  return pid;
}

std::string ExitText(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "ended with wait status " + std::to_string(status);
}

std::string Tail(const std::string& s, size_t n = 600) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

}  // namespace

Result<std::string> FindBenchProgram(const std::string& override_path) {
  std::error_code ec;
  std::string path = override_path;
  if (path.empty()) {
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    path = (self.parent_path() / "spark-bench").string();
  }
  if (!std::filesystem::is_regular_file(path, ec)) {
    return NotFoundError("spark-bench not found at " + path +
                         ": build it (cmake --build BUILD --target spark-bench) next to "
                         "sparkctl, or pass --program PATH");
  }
  return path;
}

Result<RunReport> RunLocal(const std::string& program, const CollectiveOptions& options, int ranks,
                           bool use_gpus, std::chrono::seconds timeout, bool passthrough) {
  if (ranks < 1) return InvalidArgumentError("-g must be at least 1 (ranks on this host)");
  SPARK_ASSIGN_OR_RETURN(int port, FreeLoopbackPort());
  CollectiveOptions o = options;
  if (!use_gpus && o.backend == "auto") o.backend = "gloo";
  int pipe_fds[2] = {-1, -1};
  if (!passthrough && pipe(pipe_fds) != 0) return ErrnoError(errno, "pipe");
  auto start = Clock::now();
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    RankPlacement p{r, ranks, "127.0.0.1", port, use_gpus ? r : 0, "", "", "", ""};
    std::vector<std::string> argv = {program};
    for (std::string& a : RankArgs(o, p)) argv.push_back(std::move(a));
    int out = r == 0 ? (passthrough ? STDOUT_FILENO : pipe_fds[1]) : -1;
    auto pid = Spawn(argv, out);
    if (!pid.ok()) {
      for (pid_t q : pids) kill(q, SIGTERM);
      return pid.status();
    }
    pids.push_back(*pid);
  }
  if (!passthrough) close(pipe_fds[1]);
  RunReport report;
  std::vector<int> status(ranks, -1);
  int running = ranks;
  Status failure;
  while (running > 0) {
    if (!passthrough && pipe_fds[0] >= 0) {
      pollfd p{pipe_fds[0], POLLIN, 0};
      if (poll(&p, 1, 20) > 0) {
        char buf[4096];
        ssize_t n = read(pipe_fds[0], buf, sizeof(buf));
        if (n > 0) report.output.append(buf, n);
        if (n == 0) {
          close(pipe_fds[0]);
          pipe_fds[0] = -1;
        }
      }
    } else {
      usleep(20000);
    }
    for (int r = 0; r < ranks; ++r) {
      if (status[r] != -1) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) != pids[r]) continue;
      status[r] = st;
      --running;
      bool wrong_results = r == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 2;
      if (failure.ok() && !(WIFEXITED(st) && WEXITSTATUS(st) == 0) && !wrong_results) {
        failure = InternalError("rank " + std::to_string(r) + " " + ExitText(st) +
                                " (its error is printed above)");
      }
    }
    if (!failure.ok() || Clock::now() - start > timeout) {
      if (failure.ok()) {
        failure = DeadlineExceededError("the ranks did not finish within " +
                                        std::to_string(timeout.count()) + " s (--timeout)");
      }
      for (int r = 0; r < ranks; ++r) if (status[r] == -1) kill(pids[r], SIGTERM);
      for (int r = 0; r < ranks; ++r) if (status[r] == -1) waitpid(pids[r], nullptr, 0);
      break;
    }
  }
  if (pipe_fds[0] >= 0) {
    char buf[4096];
    ssize_t n;
    while ((n = read(pipe_fds[0], buf, sizeof(buf))) > 0) report.output.append(buf, n);
    close(pipe_fds[0]);
  }
  SPARK_RETURN_IF_ERROR(failure);
  report.exit_code = WEXITSTATUS(status[0]);
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

std::string RankCommand(const std::string& remote_program, const CollectiveOptions& options,
                        const RankPlacement& placement, const std::vector<netplan::EnvVar>& env) {
  std::string cmd = "env";
  for (const netplan::EnvVar& v : env) cmd += " " + v.name + "=" + Quote(v.value);
  cmd += " " + Quote(remote_program);
  for (const std::string& a : RankArgs(options, placement)) cmd += " " + Quote(a);
  return cmd;
}

std::vector<ClusterRank> ClusterRanks(const fabric::ClusterChanges& changes,
                                      const fabric::ControlPlane& control) {
  std::vector<ClusterRank> ranks;
  for (const auto& n : changes.nodes) {
    auto it = control.addresses.find(n.node);
    ClusterRank r{n.node, it == control.addresses.end() ? n.management_address : it->second,
                  control.Env(n.plan.nccl_env)};
    auto links = netplan::PlanOneShotLinks(changes.fabric, static_cast<int>(ranks.size()));
    if (links.ok()) {
      r.oneshot_topology = links->topology;
      r.oneshot_addresses = links->AddressesFlag();
      r.oneshot_rails = links->RailsFlag();
    }
    ranks.push_back(std::move(r));
  }
  return ranks;
}

Result<std::string> InstallBench(ssh::Transport& transport, const std::string& node,
                                 const std::string& program) {
  bundle::EnsureOptions options;
  if (!program.empty()) options.overrides["spark-bench"] = program;
  auto f = bundle::EnsureProgram(transport, bundle::DefaultCatalog(), node, "spark-bench", options);
  if (!f.ok()) return f.status().WithContext("installing spark-bench");
  return f->path;
}

Result<RunReport> RunCluster(ssh::Transport& transport, const std::string& program,
                             const CollectiveOptions& options,
                             const std::vector<ClusterRank>& ranks, int master_port,
                             std::chrono::seconds timeout) {
  if (ranks.empty()) return FailedPreconditionError("the inventory has no nodes");
  for (const ClusterRank& r : ranks) {
    if (options.backend == "oneshot" && r.oneshot_addresses.empty()) {
      return FailedPreconditionError(r.node + ": the fabric plan has no one-shot links for it "
                                     "(no addressed cable to its neighbours): run `sparkctl "
                                     "net apply` and `sparkctl selftest`");
    }
  }
  std::vector<std::string> nodes;
  for (const ClusterRank& r : ranks) nodes.push_back(r.node);
  auto paths = ssh::ForEachNode<std::string>(nodes, [&](const std::string& node) {
    return InstallBench(transport, node, program);
  });
  SPARK_RETURN_IF_ERROR(ssh::JoinNodeErrors(paths));
  auto start = Clock::now();
  const int n = static_cast<int>(ranks.size());
  std::vector<Result<ssh::CommandResult>> results(n, InternalError("not run"));
  ssh::ParallelFor(n, n, [&](size_t r) {
    RankPlacement p{static_cast<int>(r), n, ranks[0].control_address, master_port, 0,
                    ranks[r].node, ranks[r].oneshot_topology, ranks[r].oneshot_addresses,
                    ranks[r].oneshot_rails};
    ssh::RunOptions ro;
    ro.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
    results[r] = transport.Run(ranks[r].node, RankCommand(*paths[r], options, p, ranks[r].env), ro);
  });
  RunReport report;
  for (int r = 0; r < n; ++r) {
    if (!results[r].ok()) return results[r].status().WithContext(ranks[r].node + " (rank " + std::to_string(r) + ")");
    const ssh::CommandResult& c = *results[r];
    bool wrong_results = r == 0 && c.exit_code == 2 && !c.stdout_data.empty();
    if (!c.ok() && !wrong_results) {
      return InternalError(ranks[r].node + " (rank " + std::to_string(r) + "): spark-bench exited with status " +
                           std::to_string(c.exit_code) + ": " + Tail(c.stderr_data));
    }
  }
  report.output = results[0]->stdout_data;
  report.exit_code = results[0]->exit_code;
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

}  // namespace spark::bench
