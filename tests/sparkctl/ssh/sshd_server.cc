#include "sshd_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/strings.h"

namespace spark::ssh::testing {
namespace {

constexpr char kSshd[] = "/usr/sbin/sshd";

bool BannerAt(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  char buf[8] = {};
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ok = ok && recv(fd, buf, 7, MSG_WAITALL) == 7 && std::string(buf) == "SSH-2.0";
  close(fd);
  return ok;
}

std::string Config(const std::string& dir, int port) {
  return "Port " + std::to_string(port) +
         "\nListenAddress 127.0.0.1\n"
         "HostKey " +
         dir +
         "/host_ed25519\n"
         "PidFile " +
         dir +
         "/sshd.pid\n"
         "AuthorizedKeysFile " +
         dir +
         "/authorized_keys\n"
         "UsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\n"
         "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
         "PubkeyAuthentication yes\nMaxStartups 100\nMaxSessions 50\n"
         "Subsystem sftp internal-sftp\nLogLevel VERBOSE\n";
}

}  // namespace

Result<std::string> Shell(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return InternalError("popen failed: " + command);
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  int rc = pclose(pipe);
  if (rc != 0)
    return InternalError("`" + command + "` failed (" + std::to_string(rc) + "): " + out);
  return out;
}

Result<int> FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return ErrnoError(errno, "bind 127.0.0.1:0");
  }
  close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

std::string SshdServer::SkipReason() {
  if (geteuid() != 0) return "needs root (sshd sessions run as root)";
  if (access(kSshd, X_OK) != 0) return std::string(kSshd) + " is not installed";
  if (access("/usr/bin/ssh-keygen", X_OK) != 0) return "ssh-keygen is not installed";
  return "";
}

Result<SshdServer> SshdServer::Prepare(const std::string& parent) {
  SshdServer server;
  std::string templ = parent + "/sshd.XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) return ErrnoError(errno, "mkdtemp " + templ);
  server.dir_ = templ;
  SPARK_ASSIGN_OR_RETURN(server.port_, FreePort());
  const std::string& d = server.dir_;
  SPARK_RETURN_IF_ERROR(Shell("ssh-keygen -q -t ed25519 -N '' -f " + d + "/host_ed25519"));
  SPARK_RETURN_IF_ERROR(Shell("ssh-keygen -q -t ed25519 -N '' -f " + d + "/client_ed25519"));
  SPARK_RETURN_IF_ERROR(Shell("cp " + d + "/client_ed25519.pub " + d + "/authorized_keys"));
  std::ofstream(d + "/sshd_config") << Config(d, server.port_);
  // Debian's sshd refuses to start without its privilege separation directory.
  std::filesystem::create_directories("/run/sshd");
  return server;
}

SshdServer::SshdServer(SshdServer&& other) noexcept
    : dir_(std::move(other.dir_)), port_(other.port_), pid_(other.pid_) {
  other.pid_ = -1;
  other.dir_.clear();
}

SshdServer::~SshdServer() {
  Stop();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

Status SshdServer::CheckConfig() const {
  SPARK_RETURN_IF_ERROR(Shell(std::string(kSshd) + " -t -f " + dir_ + "/sshd_config"));
  SPARK_ASSIGN_OR_RETURN(std::string effective,
                         Shell(std::string(kSshd) + " -T -f " + dir_ + "/sshd_config"));
  for (const char* want : {"usepam no", "strictmodes no", "passwordauthentication no"}) {
    if (effective.find(want) == std::string::npos) {
      return InternalError(std::string("sshd -T lacks '") + want + "'");
    }
  }
  if (effective.find("port " + std::to_string(port_)) == std::string::npos) {
    return InternalError("sshd -T does not listen on port " + std::to_string(port_));
  }
  return Status::Ok();
}

Status SshdServer::Start() {
  const std::string config = dir_ + "/sshd_config";
  const std::string log = dir_ + "/sshd.log";
  pid_ = fork();
  if (pid_ < 0) return ErrnoError(errno, "fork");
  if (pid_ == 0) {
    // Own process group and no inherited stdout: a leftover sshd never holds the test's pipes.
    setpgid(0, 0);
    int null_fd = open("/dev/null", O_RDWR);
    dup2(null_fd, 0);
    dup2(null_fd, 1);
    dup2(null_fd, 2);
    execl(kSshd, kSshd, "-D", "-f", config.c_str(), "-E", log.c_str(), nullptr);
    _exit(127);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (BannerAt(port_)) return Status::Ok();
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return InternalError("sshd exited at start: " + Log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return DeadlineExceededError("sshd did not answer on port " + std::to_string(port_) + ": " +
                               Log());
}

void SshdServer::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  waitpid(pid_, nullptr, 0);
  kill(-pid_, SIGKILL);  // Session processes that outlived the listener.
  pid_ = -1;
  // Wait until the listening socket is gone so a restart can bind the port again.
  for (int i = 0; i < 100 && BannerAt(port_); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Status SshdServer::RestartWithNewHostKey() {
  Stop();
  std::filesystem::remove(host_key());
  std::filesystem::remove(host_key() + ".pub");
  SPARK_RETURN_IF_ERROR(Shell("ssh-keygen -q -t ed25519 -N '' -f " + host_key()));
  return Start();
}

Result<std::string> SshdServer::HostFingerprint() const {
  SPARK_ASSIGN_OR_RETURN(std::string out,
                         Shell("ssh-keygen -l -E sha256 -f " + host_key() + ".pub"));
  std::vector<std::string> fields = Split(out, ' ', true);
  if (fields.size() < 2) return InternalError("ssh-keygen -l said: " + out);
  return fields[1];
}

std::string SshdServer::Log() const {
  std::ifstream in(dir_ + "/sshd.log");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace spark::ssh::testing
