#include "sparkctl/weights/create_manifest.h"

#include <set>

#include "sparkctl/weights/local_tree.h"
#include "sparkctl/weights/parallel_hash.h"
#include "sparkctl/weights/verify_cache.h"

namespace spark::weights {
namespace {

struct Todo {
  size_t index;  // into manifest.files
  FileIdentity identity;
};

std::string JoinPath(const std::string& dir, const std::string& rel) {
  return dir.ends_with('/') ? dir + rel : dir + "/" + rel;
}

// Fills sha256 of every Todo; stores fresh hashes in the cache.
Status HashTodo(const CreateManifestOptions& options, const std::vector<Todo>& todo,
                int64_t start_ns, Manifest& manifest, VerifyCache* cache) {
  std::vector<HashJob> jobs;
  uint64_t total = 0;
  for (const Todo& t : todo) {
    jobs.push_back({JoinPath(options.dir, manifest.files[t.index].path), t.identity.size});
    total += t.identity.size;
  }
  HashProgress progress;
  std::vector<Result<FileDigest>> digests;
  {
    ProgressMeter meter("manifest", total, jobs.size(), progress, options.progress);
    digests = HashFilesParallel(jobs, options.threads, options.hash, &progress);
  }
  for (size_t i = 0; i < todo.size(); ++i) {
    if (!digests[i].ok()) return digests[i].status();
    ManifestEntry& entry = manifest.files[todo[i].index];
    Result<FileIdentity> after = StatIdentity(jobs[i].path);
    if (!after.ok() || !(*after == todo[i].identity)) {
      return AbortedError(jobs[i].path + ": changed while it was being hashed; run again once "
                          "the download has finished");
    }
    entry.sha256 = digests[i]->sha256;
    if (cache) cache->Store(entry.path, todo[i].identity, entry.sha256, start_ns);
  }
  return Status::Ok();
}

}  // namespace

Result<Manifest> CreateManifest(const CreateManifestOptions& options) {
  int64_t start_ns = WallClockNs();
  std::string cache_path = JoinPath(options.dir, std::string(kVerifyCacheName));
  std::set<std::string> skip;
  if (std::string rel = RelativeInside(options.dir, options.out_path); !rel.empty()) skip.insert(rel);
  SPARK_ASSIGN_OR_RETURN(std::vector<LocalFile> local, ListLocalFiles(options.dir, skip));
  if (local.empty()) return FailedPreconditionError(options.dir + ": holds no files to list");

  std::optional<VerifyCache> cache;
  if (options.use_cache) cache = VerifyCache::Load(cache_path, nullptr);
  Manifest manifest{.repository = options.repository, .revision = options.revision};
  std::vector<Todo> todo;
  for (const LocalFile& file : local) {
    SPARK_ASSIGN_OR_RETURN(FileIdentity id, StatIdentity(JoinPath(options.dir, file.path)));
    SPARK_RETURN_IF_ERROR(CheckRelativePath(file.path).WithContext(file.path));
    manifest.files.push_back({.path = file.path, .size = id.size, .sha256 = ""});
    std::optional<std::string> cached = cache ? cache->Lookup(file.path, id) : std::nullopt;
    if (cached) manifest.files.back().sha256 = *cached;
    else todo.push_back({manifest.files.size() - 1, id});
  }
  SPARK_RETURN_IF_ERROR(HashTodo(options, todo, start_ns, manifest, cache ? &*cache : nullptr));
  if (cache && !todo.empty()) cache->Save(cache_path).IgnoreError();  // an optimisation only
  return manifest;
}

}  // namespace spark::weights
