#include "sparkctl/weights/sha256.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <vector>

#include <openssl/evp.h>

namespace spark::weights {
namespace {

struct EvpCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using EvpCtx = std::unique_ptr<EVP_MD_CTX, EvpCtxDeleter>;

std::string ToHex(const unsigned char* digest, unsigned int size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex(size * 2, '0');
  for (unsigned int i = 0; i < size; ++i) {
    hex[2 * i] = kDigits[digest[i] >> 4];
    hex[2 * i + 1] = kDigits[digest[i] & 0xf];
  }
  return hex;
}

Result<EvpCtx> NewSha256() {
  EvpCtx ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return InternalError("OpenSSL: cannot initialise SHA-256");
  }
  return ctx;
}

std::string Finish(EVP_MD_CTX* ctx) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(ctx, digest, &size);
  return ToHex(digest, size);
}

class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Reads the whole descriptor into the digest. Errors name `path`.
Status DigestDescriptor(int fd, const std::string& path, const HashOptions& options,
                        EVP_MD_CTX* ctx, FileDigest& out, std::atomic<uint64_t>* progress,
                        const std::atomic<bool>* cancel) {
  std::unique_ptr<char[]> buffer(new char[options.buffer_bytes]);
  while (true) {
    if (cancel && cancel->load(std::memory_order_relaxed)) return CancelledError(path + ": cancelled");
    ssize_t n = ::read(fd, buffer.get(), options.buffer_bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      Status s = ErrnoError(err, "reading " + path);
      return err == EIO ? DataLossError(s.message() + " (check the disk: dmesg)") : s;
    }
    if (n == 0) return Status::Ok();
    EVP_DigestUpdate(ctx, buffer.get(), static_cast<size_t>(n));
    out.bytes += static_cast<uint64_t>(n);
    if (progress) progress->fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  }
}

}  // namespace

std::string Sha256Hex(std::string_view data) {
  Result<EvpCtx> ctx = NewSha256();
  if (!ctx.ok()) return "";
  EVP_DigestUpdate(ctx->get(), data.data(), data.size());
  return Finish(ctx->get());
}

Result<FileDigest> HashFile(const std::string& path, const HashOptions& options,
                            std::atomic<uint64_t>* progress_bytes,
                            const std::atomic<bool>* cancel) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError(errno, "opening " + path);
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  SPARK_ASSIGN_OR_RETURN(EvpCtx ctx, NewSha256());
  FileDigest digest;
  SPARK_RETURN_IF_ERROR(
      DigestDescriptor(fd.get(), path, options, ctx.get(), digest, progress_bytes, cancel));
  if (options.drop_cache_after) ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
  digest.sha256 = Finish(ctx.get());
  return digest;
}

}  // namespace spark::weights
