#include "sparkctl/weights/local_tree.h"

#include <algorithm>
#include <filesystem>

#include "base/strings.h"
#include "sparkctl/weights/atomic_file.h"
#include "sparkctl/weights/verify_cache.h"

namespace spark::weights {
namespace fs = std::filesystem;

bool IsIgnoredPath(const std::string& rel_path) {
  return rel_path == kVerifyCacheName || IsAtomicTempName(rel_path, kVerifyCacheName) ||
         StartsWith(rel_path, ".cache/huggingface/") || StartsWith(rel_path, ".cache/sparkctl/");
}

Result<std::vector<LocalFile>> ListLocalFiles(const std::string& dir,
                                              const std::set<std::string>& also_skip) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    if (!fs::exists(dir, ec)) return NotFoundError(dir + ": no such directory");
    return FailedPreconditionError(dir + ": not a directory");
  }
  std::vector<LocalFile> files;
  fs::recursive_directory_iterator it(dir, ec), end;
  if (ec) return ErrnoError(ec.value(), "listing " + dir);
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec)) continue;  // follows file symlinks; skips dirs, sockets
    // Lexical: a symlinked shard keeps its own name, not its target's.
    std::string rel = it->path().lexically_relative(dir).generic_string();
    if (IsIgnoredPath(rel) || also_skip.contains(rel)) continue;
    files.push_back({rel, static_cast<uint64_t>(it->file_size(file_ec))});
  }
  if (ec) return ErrnoError(ec.value(), "listing " + dir);
  std::sort(files.begin(), files.end(),
            [](const LocalFile& a, const LocalFile& b) { return a.path < b.path; });
  return files;
}

std::string RelativeInside(const std::string& dir, const std::string& path) {
  std::error_code ec;
  fs::path base = fs::weakly_canonical(dir, ec);
  fs::path target = fs::weakly_canonical(path, ec);
  if (ec) return "";
  fs::path rel = target.lexically_relative(base);
  std::string text = rel.generic_string();
  if (rel.empty() || text == "." || StartsWith(text, "..")) return "";
  return text;
}

}  // namespace spark::weights
