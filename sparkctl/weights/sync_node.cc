#include "sparkctl/weights/sync_node.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "base/strings.h"
#include "sparkctl/weights/manifest.h"
#include "sparkctl/weights/sha256.h"
#include "sparkctl/weights/manifest_verify.h"

namespace spark::weights {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::string_view kProto = "SPARKCTL-SYNC/2";
constexpr size_t kChunk = 4u << 20;

// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads one '\n'-terminated line (at most 8 KiB) byte by byte: requests and headers are tiny,
// and reading no further than the newline leaves the file bytes in the socket for the caller.
bool ReadLine(int fd, std::string* line) {
  line->clear();
  char c;
  while (line->size() < 8192) {
    ssize_t n = ::recv(fd, &c, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    if (c == '\n') return true;
    line->push_back(c);
  }
  return false;
}

std::string Hex(const unsigned char* data, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 15];
  }
  return out;
}

std::string RandomHex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  if (RAND_bytes(buf.data(), static_cast<int>(buf.size())) != 1) {
    // Without a working CSPRNG no key or nonce can be trusted; there is no safe fallback.
    std::fprintf(stderr, "sparkctl: the system's random generator failed (OpenSSL RAND_bytes)\n");
    std::abort();
  }
  return Hex(buf.data(), buf.size());
}

std::string Mac(const std::string& key, const std::string& message) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &len);
  return Hex(out, len);
}

bool SameMac(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// Client side of the handshake: HELLO, check the server's proof, send the MAC'd request.
// PermissionDenied when the server does not prove it holds the key.
Status Authenticate(int sock, const std::string& from, const std::string& key,
                    const std::string& request) {
  const std::string client_nonce = RandomHex(16);
  std::string line;
  if (!SendAll(sock, std::string(kProto) + " HELLO " + client_nonce + "\n") ||
      !ReadLine(sock, &line)) {
    return UnavailableError(LocalHostname() + ": " + from + " closed the connection during the "
                            "handshake; rerun sync");
  }
  std::istringstream words(line);
  std::string verb, server_nonce, proof;
  words >> verb >> server_nonce >> proof;
  if (verb != "CHALLENGE" || server_nonce.size() != 32 ||
      !SameMac(proof, Mac(key, "server " + client_nonce + " " + server_nonce))) {
    return PermissionDeniedError(
        LocalHostname() + ": " + from + " did not prove it holds this sync's key (" +
        (line.rfind("ERR ", 0) == 0 ? line.substr(4) : "answered \"" + line.substr(0, 80) + "\"") +
        "): another host answers on that address, or a server of another sync runs there; "
        "nothing was written");
  }
  std::string mac = Mac(key, "client " + client_nonce + " " + server_nonce + " " + request);
  if (!SendAll(sock, mac + " " + request + "\n")) {
    return UnavailableError(LocalHostname() + ": " + from + " closed the connection; rerun sync");
  }
  return Status::Ok();
}

struct ServerState {
  const ServeOptions* options;
  std::mutex mu;
  int active = 0;
  Clock::time_point last_activity = Clock::now();
  std::atomic<bool> quit{false};

  bool Stopping() const {
    return quit.load() || (options->stop != nullptr && options->stop->load());
  }
};

// Sends [offset, size) of the file; stops early when the server is stopping.
void SendFileBody(ServerState& state, int sock, int file, uint64_t offset, uint64_t size) {
  const uint64_t rate = state.options->rate_limit;
  auto started = Clock::now();
  uint64_t sent = 0;
  off_t pos = static_cast<off_t>(offset);
  while (offset + sent < size && !state.Stopping()) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(size - offset - sent, kChunk));
    if (rate > 0) want = std::min<size_t>(want, std::max<uint64_t>(rate / 10, 1));
    ssize_t n = ::sendfile(sock, file, &pos, want);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    sent += static_cast<uint64_t>(n);
    if (rate > 0) {
      auto due = started + std::chrono::duration<double>(static_cast<double>(sent) / rate);
      while (Clock::now() < due && !state.Stopping()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  }
}

void HandleConnection(ServerState& state, int sock) {
  Fd guard(sock);
  auto reply_error = [&](const std::string& m) { SendAll(sock, "ERR " + m + "\n"); };
  std::string line;
  if (!ReadLine(sock, &line)) return;
  std::istringstream hello(line);
  std::string proto, verb, client_nonce;
  hello >> proto >> verb >> client_nonce;
  if (proto != kProto || verb != "HELLO" || client_nonce.size() != 32) {
    return reply_error("bad request: expected \"" + std::string(kProto) +
                       " HELLO <nonce>\" (an older sparkctl? install the same version everywhere)");
  }
  const std::string& key = state.options->key;
  const std::string server_nonce = RandomHex(16);
  if (!SendAll(sock, "CHALLENGE " + server_nonce + " " +
                         Mac(key, "server " + client_nonce + " " + server_nonce) + "\n") ||
      !ReadLine(sock, &line)) {
    return;
  }
  size_t sp0 = line.find(' ');
  std::string mac = line.substr(0, sp0);
  std::string request = sp0 == std::string::npos ? "" : line.substr(sp0 + 1);
  if (!SameMac(mac, Mac(key, "client " + client_nonce + " " + server_nonce + " " + request))) {
    return reply_error("not authenticated: the request does not carry this sync's key");
  }
  if (request == "QUIT") {
    state.quit = true;
    SendAll(sock, "OK 0\n");
    return;
  }
  // "GET <offset> <relative path>"; the path (last) may contain spaces.
  if (request.rfind("GET ", 0) != 0) return reply_error("bad request");
  const std::string rest = request.substr(4);
  size_t sp = rest.find(' ');
  if (sp == std::string::npos) return reply_error("bad request");
  uint64_t offset = std::strtoull(rest.substr(0, sp).c_str(), nullptr, 10);
  std::string rel = rest.substr(sp + 1);
  if (Status s = CheckRelativePath(rel); !s.ok()) return reply_error(s.message());
  std::string path = state.options->dir + "/" + rel;
  Fd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (file.get() < 0 || ::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return reply_error(LocalHostname() + ": " + path + ": " +
                       (file.get() < 0 ? std::strerror(errno) : "not a regular file"));
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (offset > size) offset = size;
  if (!SendAll(sock, "OK " + std::to_string(size) + "\n")) return;
  SendFileBody(state, sock, file.get(), offset, size);
}

Result<int> Listen(const ServeOptions& o) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
  addrinfo* res = nullptr;
  std::string port = std::to_string(o.port);
  if (int rc = ::getaddrinfo(o.bind.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return InvalidArgumentError("--bind " + o.bind + ": " + ::gai_strerror(rc));
  }
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int err = 0;
  if (fd < 0 || ::bind(fd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
    err = errno;
  }
  ::freeaddrinfo(res);
  if (err != 0) {
    if (fd >= 0) ::close(fd);
    return UnavailableError(LocalHostname() + ": cannot listen on " + o.bind + ":" + port + ": " +
                            std::strerror(err) +
                            " (another sync still running? pass a different --port)");
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

Result<int> Connect(const std::string& from, std::chrono::milliseconds timeout) {
  SPARK_ASSIGN_OR_RETURN(auto host_port, ParseHostPort(from));
  auto deadline = Clock::now() + timeout;
  std::string last = "no attempt";
  do {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    std::string port = std::to_string(host_port.second);
    if (int rc = ::getaddrinfo(host_port.first.c_str(), port.c_str(), &hints, &res); rc != 0) {
      last = ::gai_strerror(rc);
    } else {
      for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
        int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          ::freeaddrinfo(res);
          int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          return fd;
        }
        last = std::strerror(errno);
        if (fd >= 0) ::close(fd);
      }
      ::freeaddrinfo(res);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (Clock::now() < deadline);
  return UnavailableError("cannot connect to " + from + ": " + last +
                          " (is `sparkctl weights serve` running there, and the port open?)");
}

Result<uint64_t> FileSizeOr0(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return uint64_t{0};
    return ErrnoError(errno, path);
  }
  return static_cast<uint64_t>(st.st_size);
}

Status CheckFreeSpace(const std::string& dir, const std::string& file, uint64_t need) {
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) != 0) return ErrnoError(errno, dir);
  uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  if (avail >= need) return Status::Ok();
  return ResourceExhaustedError(LocalHostname() + ": " + dir + ": " + file + " needs " +
                                HumanBytes(need) + " more but only " + HumanBytes(avail) +
                                " are free; free space there or move model.path to a larger disk");
}

// Receives the body into the partial file from `offset`; returns the bytes written.
Result<uint64_t> ReceiveInto(int sock, const std::string& partial, uint64_t offset,
                             uint64_t total, const FetchOptions& o) {
  Fd out(::open(partial.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  if (out.get() < 0) return ErrnoError(errno, partial);
  if (::ftruncate(out.get(), static_cast<off_t>(offset)) != 0) return ErrnoError(errno, partial);
  std::vector<char> buf(1u << 20);
  uint64_t pos = offset;
  Status failure;
  while (pos < total) {
    ssize_t n = ::recv(sock, buf.data(), std::min<uint64_t>(buf.size(), total - pos), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    ssize_t w = ::pwrite(out.get(), buf.data(), static_cast<size_t>(n), static_cast<off_t>(pos));
    if (w != n) {
      int err = w < 0 ? errno : ENOSPC;
      // Keep only whole, good bytes; if even this fails the hash check catches the tail.
      if (::ftruncate(out.get(), static_cast<off_t>(pos)) != 0) err = errno;
      failure = err == ENOSPC ? ResourceExhaustedError(LocalHostname() + ": " + partial +
                                                       ": disk full; free space and rerun sync "
                                                       "(the partial copy is kept and resumed)")
                              : ErrnoError(err, partial);
      break;
    }
    pos += static_cast<uint64_t>(n);
  }
  if (::fsync(out.get()) != 0 && failure.ok()) failure = ErrnoError(errno, partial);
  if (!failure.ok()) return failure;
  if (pos < total) {
    return UnavailableError(LocalHostname() + ": fetch of " + o.file + " from " + o.from +
                            " interrupted after " + std::to_string(pos) + " of " +
                            std::to_string(total) + " bytes; the partial copy is kept at " +
                            partial + " and the next `sparkctl weights sync` resumes it");
  }
  return pos - offset;
}

Status SyncDir(const std::string& dir) {
  Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.get() < 0 || ::fsync(d.get()) != 0) return ErrnoError(errno, dir);
  return Status::Ok();
}

// After the whole body arrived: hash, then rename over the final name or remove.
Status Finalize(const FetchOptions& o, const std::string& partial, const std::string& target) {
  SPARK_ASSIGN_OR_RETURN(FileDigest got, HashFile(partial, HashOptions{}));
  if (got.sha256 != o.sha256 || got.bytes != o.size) {
    ::unlink(partial.c_str());
    return DataLossError(LocalHostname() + ": " + o.file + " received from " + o.from +
                         " has SHA-256 " + got.sha256 + " but the manifest says " + o.sha256 +
                         ": the source copy is corrupt (run `sparkctl weights verify` there); "
                         "nothing was written under the final name");
  }
  if (::rename(partial.c_str(), target.c_str()) != 0) return ErrnoError(errno, target);
  return SyncDir(std::filesystem::path(target).parent_path().string());
}

}  // namespace

std::string NewSyncKey() { return RandomHex(32); }

Result<std::string> ReadSyncKey(const std::string& path) {
  std::string line;
  if (path == "-") {
    char buf[512];
    if (std::fgets(buf, sizeof buf, stdin) != nullptr) line = buf;
    // A detached server must not keep its SSH channel open through stdin.
    if (std::freopen("/dev/null", "r", stdin) == nullptr) return ErrnoError(errno, "/dev/null");
  } else {
    std::ifstream in(path);
    if (!in) return ErrnoError(errno, path);
    std::getline(in, line);
  }
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.size() < kMinKeyLength) {
    return InvalidArgumentError((path == "-" ? std::string("stdin") : path) +
                                ": the sync key must have at least " +
                                std::to_string(kMinKeyLength) + " characters (`sparkctl "
                                "weights sync` makes one per run)");
  }
  return line;
}

std::string PartialPath(const std::string& dir, const std::string& file) {
  std::filesystem::path p = std::filesystem::path(dir) / file;
  return (p.parent_path() / ("." + p.filename().string() + std::string(kPartialSuffix))).string();
}

Result<std::pair<std::string, int>> ParseHostPort(std::string_view text) {
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return InvalidArgumentError("\"" + std::string(text) + "\": expected HOST:PORT");
  }
  std::string host(text.substr(0, colon));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::string port(text.substr(colon + 1));
  char* end = nullptr;
  long value = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || value <= 0 || value > 65535) {
    return InvalidArgumentError("\"" + std::string(text) + "\": port must be 1..65535");
  }
  return std::make_pair(host, static_cast<int>(value));
}

Status ServeFiles(const ServeOptions& o) {
  if (o.key.size() < kMinKeyLength) {
    return InvalidArgumentError("serve: the key must have at least " +
                                std::to_string(kMinKeyLength) + " characters");
  }
  struct stat st {};
  if (::stat(o.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return InvalidArgumentError(LocalHostname() + ": serve: " + o.dir + " is not a directory");
  }
  SPARK_ASSIGN_OR_RETURN(int listen_fd, Listen(o));
  Fd listener(listen_fd);
  if (o.on_listening) o.on_listening(BoundPort(listen_fd));
  ServerState state{.options = &o};
  std::vector<std::thread> threads;
  std::vector<int> open_socks;
  std::mutex socks_mu;
  while (!state.Stopping()) {
    pollfd p{listen_fd, POLLIN, 0};
    int rc = ::poll(&p, 1, 100);
    if (rc > 0) {
      int sock = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (sock < 0) continue;
      {
        std::lock_guard<std::mutex> lock(state.mu);
        ++state.active;
      }
      {
        std::lock_guard<std::mutex> lock(socks_mu);
        open_socks.push_back(sock);
      }
      threads.emplace_back([&state, sock] {
        HandleConnection(state, sock);
        std::lock_guard<std::mutex> lock(state.mu);
        --state.active;
        state.last_activity = Clock::now();
      });
      continue;
    }
    std::lock_guard<std::mutex> lock(state.mu);
    if (o.idle_exit.count() > 0 && state.active == 0 &&
        Clock::now() - state.last_activity > o.idle_exit) {
      break;
    }
  }
  // A stop drops transfers mid-way (like a killed server); QUIT lets running ones finish.
  if (o.stop != nullptr && o.stop->load()) {
    std::lock_guard<std::mutex> lock(socks_mu);
    for (int s : open_socks) ::shutdown(s, SHUT_RDWR);
  }
  for (auto& t : threads) t.join();
  return Status::Ok();
}

Result<FetchResult> FetchFile(const FetchOptions& o) {
  auto started = Clock::now();
  SPARK_RETURN_IF_ERROR(CheckRelativePath(o.file));
  if (!IsSha256Hex(o.sha256)) return InvalidArgumentError("--sha256 must be 64 lowercase hex");
  std::string target = o.dir + "/" + o.file;
  std::string partial = PartialPath(o.dir, o.file);
  std::string parent = std::filesystem::path(target).parent_path().string();
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec) return PermissionDeniedError(LocalHostname() + ": " + parent + ": " + ec.message());
  // A good final file is never touched.
  SPARK_ASSIGN_OR_RETURN(uint64_t have, FileSizeOr0(target));
  if (have == o.size && ::access(target.c_str(), F_OK) == 0) {
    Result<FileDigest> digest = HashFile(target, HashOptions{});
    if (digest.ok() && digest->sha256 == o.sha256) {
      return FetchResult{.state = "already_ok"};
    }
  }
  SPARK_ASSIGN_OR_RETURN(uint64_t resume, FileSizeOr0(partial));
  if (resume > o.size) resume = 0;  // not a prefix of this file: start over
  SPARK_RETURN_IF_ERROR(CheckFreeSpace(parent, o.file, o.size - resume));
  FetchResult result{.state = "fetched", .resumed_from = resume};
  if (resume < o.size || o.size == 0) {
    SPARK_ASSIGN_OR_RETURN(int sock_fd, Connect(o.from, o.connect_timeout));
    Fd sock(sock_fd);
    SPARK_RETURN_IF_ERROR(
        Authenticate(sock_fd, o.from, o.key, "GET " + std::to_string(resume) + " " + o.file));
    std::string header;
    if (!ReadLine(sock_fd, &header)) {
      return UnavailableError(LocalHostname() + ": " + o.from + " closed the connection before "
                              "answering for " + o.file + "; rerun sync");
    }
    if (header.rfind("OK ", 0) != 0) {
      return FailedPreconditionError(LocalHostname() + ": " + o.from + " refused " + o.file +
                                     ": " + (header.rfind("ERR ", 0) == 0 ? header.substr(4) : header));
    }
    uint64_t total = std::strtoull(header.c_str() + 3, nullptr, 10);
    if (total != o.size) {
      return DataLossError(LocalHostname() + ": the source " + o.from + " has " + o.file + " at " +
                           std::to_string(total) + " bytes but the manifest says " +
                           std::to_string(o.size) + ": the source copy is corrupt; nothing "
                           "was written (verify the source with `sparkctl weights verify`)");
    }
    SPARK_ASSIGN_OR_RETURN(result.bytes_received, ReceiveInto(sock_fd, partial, resume, total, o));
  }  // else: a complete partial from an earlier run; only its hash is left to check
  SPARK_RETURN_IF_ERROR(Finalize(o, partial, target));
  result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return result;
}

Status SendQuit(const std::string& from, const std::string& key,
                std::chrono::milliseconds timeout) {
  SPARK_ASSIGN_OR_RETURN(int sock_fd, Connect(from, timeout));
  Fd sock(sock_fd);
  SPARK_RETURN_IF_ERROR(Authenticate(sock_fd, from, key, "QUIT"));
  std::string reply;
  if (!ReadLine(sock_fd, &reply) || reply.rfind("OK", 0) != 0) {
    return UnavailableError("quit " + from + ": " + (reply.empty() ? "no answer" : reply));
  }
  return Status::Ok();
}

}  // namespace spark::weights
