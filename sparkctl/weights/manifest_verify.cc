#include "sparkctl/weights/manifest_verify.h"

#include <unistd.h>

#include <chrono>
#include <set>

#include "base/logging.h"
#include "base/strings.h"
#include "sparkctl/weights/local_tree.h"
#include "sparkctl/weights/parallel_hash.h"
#include "sparkctl/weights/verify_cache.h"

namespace spark::weights {
namespace {

constexpr std::string_view kStateNames[] = {"ok",           "missing",       "size_mismatch",
                                            "hash_mismatch", "extra",        "unreadable"};

std::string JoinPath(const std::string& dir, const std::string& rel) {
  return EndsWith(dir, "/") ? dir + rel : dir + "/" + rel;
}

class Verifier {
 public:
  Verifier(const Manifest& manifest, const VerifyOptions& options)
      : manifest_(manifest), options_(options) {}

  Result<VerifyReport> Run();

 private:
  struct Pending {
    size_t index;
    FileIdentity before;
  };

  void LoadCache();
  void CheckEntry(size_t index);
  void HashPending();
  void RecordHash(const Pending& pending, const Result<FileDigest>& digest);
  std::set<std::string> OwnFilesInDir() const;
  void CollectExtras();
  void SaveCache();

  const Manifest& manifest_;
  const VerifyOptions& options_;
  VerifyReport report_;
  std::string cache_path_;
  std::optional<VerifyCache> cache_;
  bool cache_dirty_ = false;
  int64_t start_ns_ = WallClockNs();
  std::vector<Pending> pending_;
  std::vector<LocalFile> local_;
};

void Judge(FileCheck& check) {
  if (check.actual_sha256 == check.expected_sha256) {
    check.state = FileState::kOk;
    return;
  }
  check.state = FileState::kHashMismatch;
  check.detail = "sha256 " + check.actual_sha256 + " but the manifest says " +
                 check.expected_sha256 + ": the file is corrupt; delete it and sync or "
                 "re-download it";
}

Result<VerifyReport> Verifier::Run() {
  auto started = std::chrono::steady_clock::now();
  report_.node = options_.node.empty() ? LocalHostname() : options_.node;
  report_.dir = options_.dir;
  report_.manifest = options_.manifest_path;
  report_.repository = manifest_.repository;
  report_.revision = manifest_.revision;
  report_.threads = options_.threads > 0 ? options_.threads : AvailableCpus();
  LoadCache();
  // Listed first: a directory that cannot be read fails the run before anything is judged.
  SPARK_ASSIGN_OR_RETURN(local_, ListLocalFiles(options_.dir, OwnFilesInDir()));
  report_.files.resize(manifest_.files.size());
  for (size_t i = 0; i < manifest_.files.size(); ++i) CheckEntry(i);
  HashPending();
  CollectExtras();
  SaveCache();
  report_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return std::move(report_);
}

void Verifier::LoadCache() {
  if (!options_.use_cache) return;
  cache_path_ = options_.cache_path.empty() ? JoinPath(options_.dir, std::string(kVerifyCacheName))
                                            : options_.cache_path;
  std::string warning;
  cache_ = VerifyCache::Load(cache_path_, &warning);
  if (!warning.empty()) {
    report_.warnings.push_back(warning);
    cache_dirty_ = true;  // rewrite the corrupt file with good content
  }
}

void Verifier::CheckEntry(size_t index) {
  const ManifestEntry& entry = manifest_.files[index];
  FileCheck& check = report_.files[index];
  check.path = entry.path;
  check.expected_size = entry.size;
  check.expected_sha256 = entry.sha256;
  Result<FileIdentity> identity = StatIdentity(JoinPath(options_.dir, entry.path));
  if (!identity.ok()) {
    bool missing = identity.status().code() == StatusCode::kNotFound;
    check.state = missing ? FileState::kMissing : FileState::kUnreadable;
    check.detail = missing ? "missing: sync it from a good node or download it again"
                           : identity.status().message();
    return;
  }
  check.actual_size = identity->size;
  report_.bytes_total += identity->size;
  if (entry.size && *entry.size != identity->size) {
    check.state = FileState::kSizeMismatch;
    check.detail = "size " + std::to_string(identity->size) + " bytes but the manifest says " +
                   std::to_string(*entry.size) +
                   " (truncated or partial download?); delete it and sync or re-download it";
    return;
  }
  std::optional<std::string> cached = cache_ ? cache_->Lookup(entry.path, *identity) : std::nullopt;
  if (!cached) {
    pending_.push_back({index, *identity});
    return;
  }
  check.from_cache = true;
  check.actual_sha256 = *cached;
  report_.bytes_cached += identity->size;
  Judge(check);
}

void Verifier::HashPending() {
  std::vector<HashJob> jobs;
  uint64_t total = 0;
  for (const Pending& p : pending_) {
    jobs.push_back({JoinPath(options_.dir, manifest_.files[p.index].path), p.before.size});
    total += p.before.size;
  }
  if (jobs.empty()) return;
  HashProgress progress;
  std::vector<Result<FileDigest>> digests;
  {
    ProgressMeter meter("verify", total, jobs.size(), progress, options_.progress);
    digests = HashFilesParallel(jobs, options_.threads, options_.hash, &progress);
  }
  for (size_t i = 0; i < pending_.size(); ++i) RecordHash(pending_[i], digests[i]);
}

void Verifier::RecordHash(const Pending& pending, const Result<FileDigest>& digest) {
  FileCheck& check = report_.files[pending.index];
  if (!digest.ok()) {
    check.state = FileState::kUnreadable;
    check.detail = digest.status().message();
    return;
  }
  report_.bytes_hashed += digest->bytes;
  Result<FileIdentity> after = StatIdentity(JoinPath(options_.dir, check.path));
  if (!after.ok() || !(*after == pending.before) || digest->bytes != pending.before.size) {
    check.state = FileState::kUnreadable;
    check.detail = "changed while it was being verified; run verify again once nothing writes it";
    return;
  }
  check.actual_sha256 = digest->sha256;
  Judge(check);
  if (cache_) {
    cache_->Store(check.path, pending.before, digest->sha256, start_ns_);
    cache_dirty_ = true;
  }
}

// The manifest and the cache may live inside the directory; they are not extras.
std::set<std::string> Verifier::OwnFilesInDir() const {
  std::set<std::string> skip;
  for (const std::string& path : {options_.manifest_path, cache_path_}) {
    if (path.empty()) continue;
    std::string rel = RelativeInside(options_.dir, path);
    if (!rel.empty()) skip.insert(rel);
  }
  return skip;
}

void Verifier::CollectExtras() {
  std::set<std::string> listed;
  for (const ManifestEntry& e : manifest_.files) listed.insert(e.path);
  for (const LocalFile& file : local_) {
    if (listed.contains(file.path)) continue;
    FileCheck check{.path = file.path, .state = FileState::kExtra, .actual_size = file.size};
    check.detail = "not in the manifest: remove it, or regenerate the manifest if it belongs";
    report_.files.push_back(std::move(check));
  }
}

void Verifier::SaveCache() {
  if (!cache_) return;
  std::set<std::string> keep;
  for (const ManifestEntry& e : manifest_.files) keep.insert(e.path);
  size_t before = cache_->size();
  cache_->Retain(keep);
  if (!cache_dirty_ && cache_->size() == before) return;
  Status saved = cache_->Save(cache_path_);
  if (!saved.ok()) {
    report_.warnings.push_back("verify cache not saved (the next verify re-reads every file): " +
                               saved.message());
    Logger("weights")->warn("{}", report_.warnings.back());
  }
}

}  // namespace

std::string_view FileStateName(FileState state) { return kStateNames[static_cast<int>(state)]; }

std::optional<FileState> ParseFileState(std::string_view name) {
  for (size_t i = 0; i < std::size(kStateNames); ++i) {
    if (kStateNames[i] == name) return static_cast<FileState>(i);
  }
  return std::nullopt;
}

size_t VerifyReport::Count(FileState state) const {
  size_t n = 0;
  for (const FileCheck& f : files) n += f.state == state ? 1 : 0;
  return n;
}

bool VerifyReport::ok(bool allow_extra) const {
  for (const FileCheck& f : files) {
    if (f.state != FileState::kOk && !(allow_extra && f.state == FileState::kExtra)) return false;
  }
  return true;
}

Result<VerifyReport> VerifyDirectory(const Manifest& manifest, const VerifyOptions& options) {
  // Nothing to compare would read as "verified": refuse it.
  if (manifest.files.empty()) {
    return InvalidArgumentError(
        (options.manifest_path.empty() ? std::string("the manifest") : options.manifest_path) +
        " lists no files, so it would verify nothing: recreate it from a full copy with "
        "`sparkctl weights manifest DIR --out FILE`");
  }
  Verifier verifier(manifest, options);
  return verifier.Run();
}

std::string LocalHostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace spark::weights
