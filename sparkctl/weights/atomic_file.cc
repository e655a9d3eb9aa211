#include "sparkctl/weights/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>

#include "base/strings.h"

namespace spark::weights {
namespace {

constexpr std::string_view kTempInfix = ".tmp.";

// Closes the descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int Release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

Status WriteAll(int fd, std::string_view content, const std::string& name) {
  while (!content.empty()) {
    ssize_t n = ::write(fd, content.data(), content.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, "writing " + name);
    content.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

std::string TempPathFor(const std::string& path) {
  static std::atomic<int> counter{0};
  return path + std::string(kTempInfix) + std::to_string(::getpid()) + "." +
         std::to_string(counter.fetch_add(1));
}

// Writes, fsyncs and closes the temp file; the caller removes it on failure.
Status WriteTemp(const std::string& temp, std::string_view content, const std::string& path) {
  Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) return ErrnoError(errno, "creating a temp file for " + path);
  SPARK_RETURN_IF_ERROR(WriteAll(fd.get(), content, path));
  if (::fsync(fd.get()) != 0) return ErrnoError(errno, "flushing " + path);
  if (::close(fd.Release()) != 0) return ErrnoError(errno, "closing " + path);
  return Status::Ok();
}

void SyncParentDirectory(const std::string& path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) parent = ".";
  Fd dir(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0) ::fsync(dir.get());  // best effort: the rename already happened
}

}  // namespace

Result<std::string> ReadWholeFile(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError(errno, "opening " + path);
  std::string content;
  char buffer[1 << 16];
  while (true) {
    ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, "reading " + path);
    if (n == 0) break;
    content.append(buffer, static_cast<size_t>(n));
  }
  return content;
}

Status WriteFileAtomically(const std::string& path, std::string_view content) {
  std::string temp = TempPathFor(path);
  Status status = WriteTemp(temp, content, path);
  if (status.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
    status = ErrnoError(errno, "renaming " + temp + " to " + path);
  }
  if (!status.ok()) {
    ::unlink(temp.c_str());
    return Status(status.code(), status.message() + " (" + path + " left unchanged)");
  }
  SyncParentDirectory(path);
  return Status::Ok();
}

bool IsAtomicTempName(std::string_view name, std::string_view target_name) {
  return StartsWith(name, std::string(target_name) + std::string(kTempInfix));
}

}  // namespace spark::weights
