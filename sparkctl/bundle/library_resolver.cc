#include "sparkctl/bundle/library_resolver.h"

#include <glob.h>
#include <sys/utsname.h>

#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <set>

#include "base/strings.h"

namespace spark::bundle {
namespace {

namespace fs = std::filesystem;

struct ProviderRule {
  const char* prefix;  // soname starts with it
  const char* provider;
};

// The libraries a node provides (see the header for why). Prefixes of sonames.
constexpr ProviderRule kProviders[] = {
    {"ld-linux-", "glibc"},      {"libc.so.", "glibc"},        {"libm.so.", "glibc"},
    {"libmvec.so.", "glibc"},    {"libpthread.so.", "glibc"},  {"libdl.so.", "glibc"},
    {"librt.so.", "glibc"},      {"libresolv.so.", "glibc"},   {"libutil.so.", "glibc"},
    {"libanl.so.", "glibc"},     {"libnss_", "glibc"},         {"libBrokenLocale.so.", "glibc"},
    {"libthread_db.so.", "glibc"},
    {"libstdc++.so.", "the GCC runtime"}, {"libgcc_s.so.", "the GCC runtime"},
    {"libcuda.so.", "the NVIDIA driver"}, {"libnvidia-", "the NVIDIA driver"},
    {"libibverbs.so.", "rdma-core"},      {"librdmacm.so.", "rdma-core"},
    {"libmlx5.so.", "rdma-core"},
};

std::string Triplet(const std::string& machine) { return machine + "-linux-gnu"; }

// Folders named in an ld.so.conf file, following its `include` globs.
void ReadLdSoConf(const std::string& path, int depth, std::vector<std::string>* dirs) {
  std::ifstream in(path);
  std::string line;
  while (depth < 4 && std::getline(in, line)) {
    const std::string uncommented = line.substr(0, line.find('#'));
    std::string_view l = Trim(uncommented);
    if (l.empty()) continue;
    if (StartsWith(l, "include")) {
      std::string pattern(Trim(l.substr(7)));
      if (!pattern.starts_with('/')) pattern = fs::path(path).parent_path().string() + "/" + pattern;
      glob_t g{};
      if (glob(pattern.c_str(), 0, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) ReadLdSoConf(g.gl_pathv[i], depth + 1, dirs);
      }
      globfree(&g);
      continue;
    }
    dirs->emplace_back(l);
  }
}

std::string ExpandOrigin(const std::string& dir, const std::string& origin) {
  std::string out = dir;
  for (const char* token : {"${ORIGIN}", "$ORIGIN"}) {
    for (size_t at; (at = out.find(token)) != std::string::npos;) {
      out.replace(at, std::strlen(token), origin);
    }
  }
  return out;
}

std::string RealPath(const std::string& path) {
  std::error_code ec;
  fs::path real = fs::canonical(path, ec);
  return ec ? path : real.string();
}

std::string Origin(const std::string& path) { return fs::path(RealPath(path)).parent_path().string(); }

class Resolver {
 public:
  Resolver(std::string machine, const ElfFile& program, const ResolveOptions& o)
      : machine_(std::move(machine)), options_(o) {
    for (const auto& d : program.rpath) program_rpath_.push_back(ExpandOrigin(d, Origin(program.path)));
    if (o.system_dirs) system_ = SystemLibraryDirs(machine_, o.ld_so_conf);
  }

  // The file that provides `soname` for `object`, or NotFound.
  Result<std::string> Find(const std::string& soname, const ElfFile& object) const {
    std::vector<std::string> dirs;
    const std::string origin = Origin(object.path);
    if (object.runpath.empty()) {
      for (const auto& d : object.rpath) dirs.push_back(ExpandOrigin(d, origin));
      dirs.insert(dirs.end(), program_rpath_.begin(), program_rpath_.end());
    }
    for (const auto& d : object.runpath) dirs.push_back(ExpandOrigin(d, origin));
    dirs.insert(dirs.end(), options_.extra_dirs.begin(), options_.extra_dirs.end());
    dirs.insert(dirs.end(), system_.begin(), system_.end());
    for (const auto& dir : dirs) {
      const std::string candidate = dir + "/" + soname;
      std::error_code ec;
      if (!fs::is_regular_file(candidate, ec)) continue;
      Result<ElfFile> elf = ReadElfFile(candidate);
      if (elf.ok() && elf->machine == machine_) return candidate;
    }
    return NotFoundError(object.path + " needs " + soname + " (" + machine_ +
                         "), found in none of: " + Join(dirs, ", "));
  }

 private:
  std::string machine_;
  ResolveOptions options_;
  std::vector<std::string> program_rpath_;
  std::vector<std::string> system_;
};

void Raise(const std::string& version, const std::string& from, std::string* newest,
           std::string* newest_from) {
  if (CompareVersions(version, *newest) > 0) {
    *newest = version;
    *newest_from = from;
  }
}

}  // namespace

std::string NodeProvider(std::string_view soname) {
  for (const auto& rule : kProviders) {
    if (StartsWith(soname, rule.prefix)) return rule.provider;
  }
  return "";
}

std::string HostMachine() {
  utsname u{};
  uname(&u);
  return NormalizeMachine(u.machine);
}

std::vector<std::string> SystemLibraryDirs(const std::string& machine,
                                           const std::string& ld_so_conf) {
  std::vector<std::string> candidates;
  const std::string t = Triplet(machine);
  if (machine == HostMachine()) ReadLdSoConf(ld_so_conf, 0, &candidates);
  for (const std::string& d : {"/lib/" + t, "/usr/lib/" + t, "/usr/" + t + "/lib"}) {
    candidates.push_back(d);
  }
  if (machine == HostMachine()) {
    for (const char* d : {"/lib64", "/usr/lib64", "/lib", "/usr/lib"}) candidates.push_back(d);
  }
  std::vector<std::string> dirs;
  std::set<std::string> seen;
  for (const auto& d : candidates) {
    std::error_code ec;
    if (fs::is_directory(d, ec) && seen.insert(RealPath(d)).second) dirs.push_back(d);
  }
  return dirs;
}

Result<ResolvedLibraries> ResolveLibraries(const std::vector<std::string>& programs,
                                           const ResolveOptions& options) {
  if (programs.empty()) return InvalidArgumentError("no programs to resolve");
  ResolvedLibraries out;
  std::deque<std::pair<ElfFile, const ElfFile*>> queue;  // (object, its program)
  std::vector<ElfFile> loaded;
  loaded.reserve(programs.size());
  for (const auto& p : programs) {
    SPARK_ASSIGN_OR_RETURN(ElfFile elf, ReadElfFile(p));
    if (out.machine.empty()) out.machine = elf.machine;
    if (elf.machine != out.machine) {
      return InvalidArgumentError(p + " is " + elf.machine + " but " + programs[0] + " is " +
                                  out.machine + ": one bundle holds programs of one machine");
    }
    loaded.push_back(std::move(elf));
  }
  for (const auto& program : loaded) queue.emplace_back(program, &program);
  std::set<std::string> visited;
  while (!queue.empty()) {
    auto [object, program] = std::move(queue.front());
    queue.pop_front();
    Raise(object.glibc, object.path, &out.glibc, &out.glibc_from);
    Raise(object.glibcxx, object.path, &out.glibcxx, &out.glibcxx_from);
    Resolver resolver(out.machine, *program, options);
    for (const auto& soname : object.needed) {
      if (std::string provider = NodeProvider(soname); !provider.empty()) {
        out.from_node[soname] = provider;
        continue;
      }
      if (!visited.insert(soname).second) continue;
      SPARK_ASSIGN_OR_RETURN(std::string path, resolver.Find(soname, object));
      out.bundled[soname] = RealPath(path);
      SPARK_ASSIGN_OR_RETURN(ElfFile lib, ReadElfFile(path));
      queue.emplace_back(std::move(lib), program);
    }
  }
  return out;
}

}  // namespace spark::bundle
