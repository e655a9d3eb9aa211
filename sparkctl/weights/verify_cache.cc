#include "sparkctl/weights/verify_cache.h"

#include <sys/stat.h>

#include <cerrno>
#include <ctime>

#include <nlohmann/json.hpp>

#include "sparkctl/weights/atomic_file.h"
#include "sparkctl/weights/manifest.h"

namespace spark::weights {
namespace {

using Json = nlohmann::json;

int64_t ToNs(const struct timespec& ts) {
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

Result<std::map<std::string, VerifyCache::Entry>> ParseEntries(const std::string& text) {
  try {
    Json doc = Json::parse(text);
    if (doc.value("schema", "") != kVerifyCacheSchema) {
      return InvalidArgumentError("unknown schema " + doc.value("schema", std::string("(none)")));
    }
    std::map<std::string, VerifyCache::Entry> entries;
    for (const Json& e : doc.at("entries")) {
      VerifyCache::Entry entry{
          .identity = {.device = e.at("dev").get<uint64_t>(),
                       .inode = e.at("ino").get<uint64_t>(),
                       .size = e.at("size").get<uint64_t>(),
                       .mtime_ns = e.at("mtime_ns").get<int64_t>(),
                       .ctime_ns = e.at("ctime_ns").get<int64_t>()},
          .sha256 = e.at("sha256").get<std::string>(),
          .hashed_at_ns = e.at("hashed_at_ns").get<int64_t>()};
      if (!IsSha256Hex(entry.sha256)) return InvalidArgumentError("bad sha256 in an entry");
      entries[e.at("path").get<std::string>()] = std::move(entry);
    }
    return entries;
  } catch (const Json::exception& e) {
    return InvalidArgumentError(e.what());
  }
}

}  // namespace

Result<FileIdentity> StatIdentity(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(errno, path);
  if (!S_ISREG(st.st_mode)) {
    return FailedPreconditionError(path + ": not a regular file (" +
                                   (S_ISDIR(st.st_mode) ? "a directory" : "a special file") + ")");
  }
  return FileIdentity{.device = static_cast<uint64_t>(st.st_dev),
                      .inode = static_cast<uint64_t>(st.st_ino),
                      .size = static_cast<uint64_t>(st.st_size),
                      .mtime_ns = ToNs(st.st_mtim),
                      .ctime_ns = ToNs(st.st_ctim)};
}

int64_t WallClockNs() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return ToNs(ts);
}

VerifyCache VerifyCache::Load(const std::string& path, std::string* warning) {
  VerifyCache cache;
  Result<std::string> text = ReadWholeFile(path);
  if (!text.ok()) {
    if (text.status().code() != StatusCode::kNotFound && warning) {
      *warning = "verify cache ignored: " + text.status().message();
    }
    return cache;
  }
  auto entries = ParseEntries(*text);
  if (!entries.ok()) {
    if (warning) {
      *warning = "verify cache " + path + " is corrupt and was ignored (it will be rewritten): " +
                 entries.status().message();
    }
    return cache;
  }
  cache.entries_ = std::move(*entries);
  return cache;
}

std::optional<std::string> VerifyCache::Lookup(const std::string& rel_path,
                                               const FileIdentity& identity) const {
  auto it = entries_.find(rel_path);
  if (it == entries_.end() || !(it->second.identity == identity)) return std::nullopt;
  // Racy: modified in the same clock tick the hash was taken; the content may differ.
  if (identity.mtime_ns >= it->second.hashed_at_ns - kRacyWindowNs) return std::nullopt;
  return it->second.sha256;
}

void VerifyCache::Store(const std::string& rel_path, const FileIdentity& identity,
                        std::string sha256, int64_t hashed_at_ns) {
  entries_[rel_path] = Entry{identity, std::move(sha256), hashed_at_ns};
}

void VerifyCache::Retain(const std::set<std::string>& keep) {
  std::erase_if(entries_, [&](const auto& kv) { return !keep.contains(kv.first); });
}

std::string VerifyCache::ToJson() const {
  Json entries = Json::array();
  for (const auto& [path, e] : entries_) {
    entries.push_back({{"path", path},
                       {"dev", e.identity.device},
                       {"ino", e.identity.inode},
                       {"size", e.identity.size},
                       {"mtime_ns", e.identity.mtime_ns},
                       {"ctime_ns", e.identity.ctime_ns},
                       {"sha256", e.sha256},
                       {"hashed_at_ns", e.hashed_at_ns}});
  }
  Json doc = {{"schema", kVerifyCacheSchema}, {"entries", std::move(entries)}};
  return doc.dump(1) + "\n";
}

Status VerifyCache::Save(const std::string& path) const {
  return WriteFileAtomically(path, ToJson());
}

}  // namespace spark::weights
