#include "sparkctl/ssh/self_copy.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "base/logging.h"
#include "base/strings.h"

namespace spark::ssh {
namespace {

std::string Hex(const unsigned char* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 0xf];
  }
  return out;
}

bool IsSha256Hex(std::string_view text) {
  return text.size() == 64 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// `stat` of what identifies one version of a file: size, mtime and ctime (ns) and inode.
std::string StatCommand(const std::string& quoted_path) {
  return "stat -c %s:%.9Y:%.9Z:%i " + quoted_path + " 2>/dev/null";
}

}  // namespace

Result<std::string> Sha256File(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (file == nullptr) return ErrnoError(errno, "cannot open " + path);
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (ctx == nullptr || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return InternalError("OpenSSL SHA-256 init failed");
  }
  std::vector<char> buf(1 << 20);
  while (size_t n = std::fread(buf.data(), 1, buf.size(), file.get())) {
    EVP_DigestUpdate(ctx.get(), buf.data(), n);
  }
  if (std::ferror(file.get())) return ErrnoError(errno, "cannot read " + path);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &size);
  return Hex(digest, size);
}

std::string Sha256Text(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr);
  return Hex(digest, size);
}

Result<std::string> RemoteSha256(Transport& transport, const std::string& node,
                                 const std::string& remote_path) {
  const std::string quoted = ShellQuote(remote_path);
  const std::string stamp = ShellQuote(remote_path + ".stamp");
  // Hash, print, and record the stamp (best effort: a read-only directory only costs speed).
  const std::string command = "if [ -e " + quoted + " ]; then h=$(sha256sum < " + quoted +
                              ") && h=${h%% *} && echo \"$h  \"" + quoted +
                              " && { printf '%s %s\\n' \"$(" + StatCommand(quoted) +
                              ")\" \"$h\" > " + stamp + " 2>/dev/null || true; }; fi";
  SPARK_ASSIGN_OR_RETURN(CommandResult result, RunChecked(transport, node, command));
  std::string_view out = Trim(result.stdout_data);
  if (out.empty()) return std::string();
  std::string_view hex = out.substr(0, out.find(' '));
  if (!IsSha256Hex(hex)) {
    return InternalError(node + ": unexpected sha256sum output: " + Tail(result.stdout_data, 200));
  }
  return std::string(hex);
}

Result<RemoteFile> EnsureFileOnNode(Transport& transport, const std::string& node,
                                    const std::string& local_path, const std::string& remote_path,
                                    int mode) {
  SPARK_ASSIGN_OR_RETURN(std::string local_sum, Sha256File(local_path));
  SPARK_ASSIGN_OR_RETURN(std::string remote_sum, RemoteSha256(transport, node, remote_path));
  RemoteFile file{remote_path, local_sum, false};
  if (remote_sum == local_sum) return file;
  const std::string dir = std::filesystem::path(remote_path).parent_path().string();
  if (!dir.empty()) {
    SPARK_RETURN_IF_ERROR(RunChecked(transport, node, "mkdir -p " + ShellQuote(dir)));
  }
  SPARK_RETURN_IF_ERROR(transport.Upload(node, local_path, remote_path, mode));
  SPARK_ASSIGN_OR_RETURN(std::string after, RemoteSha256(transport, node, remote_path));
  if (after != local_sum) {
    return DataLossError(node + ": " + remote_path + " has SHA-256 " + after +
                         " after upload, expected " + local_sum);
  }
  Logger("ssh")->info("{}: installed {} ({})", node, remote_path, local_sum.substr(0, 12));
  file.uploaded = true;
  return file;
}

}  // namespace spark::ssh
