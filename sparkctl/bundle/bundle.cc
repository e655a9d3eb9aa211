#include "sparkctl/bundle/bundle.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "base/strings.h"
#include "sparkctl/ssh/self_copy.h"

namespace spark::bundle {
namespace {

namespace fs = std::filesystem;

bool IsKnownProgram(const std::string& name) {
  return std::find_if(std::begin(kPrograms), std::end(kPrograms),
                      [&](const char* p) { return name == p; }) != std::end(kPrograms);
}

Result<BundleFile> HashFile(const std::string& path, const std::string& source, int mode) {
  std::error_code ec;
  const uint64_t size = fs::file_size(source, ec);
  if (ec) return NotFoundError("cannot read " + source + ": " + ec.message());
  SPARK_ASSIGN_OR_RETURN(std::string sha, ssh::Sha256File(source));
  return BundleFile{.path = path, .sha256 = sha, .size = size, .mode = mode, .source = source};
}

// "/work/build/bin/sparkctl" -> "bin/sparkctl" for messages and the manifest.
std::string BundlePathOf(const std::string& file, const MakeOptions& o,
                         const ResolvedLibraries& libs) {
  for (const auto& [name, path] : o.programs) {
    if (fs::path(path).lexically_normal() == fs::path(file).lexically_normal()) return "bin/" + name;
  }
  for (const auto& [name, path] : o.plugins) {
    if (fs::path(path).lexically_normal() == fs::path(file).lexically_normal()) return "lib/" + name;
  }
  for (const auto& [soname, path] : libs.bundled) {
    if (path == file) return "lib/" + soname;
  }
  return file;
}

bool IsCudaLibrary(const std::string& soname) {
  return StartsWith(soname, "libcudart.so") || StartsWith(soname, "libcublas");
}

Status CopyFile(const std::string& from, const std::string& to, int mode) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) return InternalError("cannot copy " + from + " to " + to + ": " + ec.message());
  if (chmod(to.c_str(), static_cast<mode_t>(mode)) != 0) {
    return ErrnoError(errno, "cannot chmod " + to);
  }
  return Status::Ok();
}

}  // namespace

std::string Bundle::ManifestText() const { return BundleToJson(*this).dump(2) + "\n"; }

std::string Bundle::Id() const {
  return ssh::Sha256Text(ManifestText());
}

const BundleFile* Bundle::Find(const std::string& path) const {
  for (const auto& f : files) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

std::string Bundle::Describe() const {
  int programs = 0, libraries = 0;
  uint64_t bytes = 0;
  for (const auto& f : files) {
    (StartsWith(f.path, "bin/") ? programs : libraries)++;
    bytes += f.size;
  }
  return fmt::format("{} bundle {} (sparkctl {}{}, {} program{}, {} librar{}, {})", machine,
                     Id().substr(0, 12), version, cuda ? ", CUDA" : "", programs,
                     programs == 1 ? "" : "s", libraries, libraries == 1 ? "y" : "ies",
                     HumanBytes(bytes));
}

Result<Bundle> MakeBundle(const MakeOptions& o) {
  if (o.programs.empty()) return InvalidArgumentError("a bundle needs at least one program");
  std::vector<std::string> paths;
  for (const auto& [name, path] : o.programs) {
    if (!IsKnownProgram(name)) {
      return InvalidArgumentError("'" + name + "' is not a program a bundle holds (sparkctl, "
                                  "spark-engine, spark-bench)");
    }
    SPARK_ASSIGN_OR_RETURN(ElfFile elf, ReadElfFile(path));
    const bool finds_bundle_libs =
        std::find(elf.rpath.begin(), elf.rpath.end(), kBundleRpath) != elf.rpath.end();
    if (!finds_bundle_libs) {
      return FailedPreconditionError(
          path + " does not look for libraries in " + kBundleRpath +
          " (its DT_RPATH is '" + Join(elf.rpath, ":") + "'), so in a bundle it would use the "
          "node's own: build it from this tree, whose executables carry that RPATH");
    }
    paths.push_back(path);
  }
  for (const auto& [name, path] : o.plugins) paths.push_back(path);
  SPARK_ASSIGN_OR_RETURN(ResolvedLibraries libs, ResolveLibraries(paths, o.resolve));
  Bundle b;
  b.machine = libs.machine;
  b.version = o.version;
  for (const auto& [name, path] : o.programs) {
    SPARK_ASSIGN_OR_RETURN(BundleFile f, HashFile("bin/" + name, path, 0755));
    b.files.push_back(std::move(f));
  }
  for (const auto& [name, path] : o.plugins) {
    SPARK_ASSIGN_OR_RETURN(BundleFile f, HashFile("lib/" + name, path, 0644));
    b.files.push_back(std::move(f));
  }
  for (const auto& [soname, path] : libs.bundled) {
    SPARK_ASSIGN_OR_RETURN(BundleFile f, HashFile("lib/" + soname, path, 0644));
    b.files.push_back(std::move(f));
    b.cuda = b.cuda || IsCudaLibrary(soname);
  }
  std::sort(b.files.begin(), b.files.end(),
            [](const BundleFile& x, const BundleFile& y) { return x.path < y.path; });
  b.needs.glibc = libs.glibc;
  b.needs.glibc_from = BundlePathOf(libs.glibc_from, o, libs);
  b.needs.glibcxx = libs.glibcxx;
  b.needs.glibcxx_from = BundlePathOf(libs.glibcxx_from, o, libs);
  b.needs.node_libraries = libs.from_node;
  return b;
}

Status WriteBundle(const Bundle& bundle, const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
    return FailedPreconditionError(dir + " is not empty: choose a new folder for the bundle, or "
                                   "remove the old one first");
  }
  for (const char* sub : {"bin", "lib"}) {
    fs::create_directories(fs::path(dir) / sub, ec);
    if (ec) return InternalError("cannot create " + dir + "/" + sub + ": " + ec.message());
  }
  for (const auto& f : bundle.files) {
    SPARK_RETURN_IF_ERROR(CopyFile(f.source, dir + "/" + f.path, f.mode));
  }
  std::ofstream out(dir + "/" + kManifestName);
  out << bundle.ManifestText();
  out.close();
  if (!out) return InternalError("cannot write " + dir + "/" + kManifestName);
  return Status::Ok();
}

Result<Bundle> LoadBundle(const std::string& dir, bool verify) {
  const std::string path = dir + "/" + kManifestName;
  std::ifstream in(path);
  if (!in) {
    return NotFoundError(path + " does not exist: " + dir + " is not a bundle (make one with "
                         "`sparkctl bundle make --out DIR`)");
  }
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded()) return InvalidArgumentError(path + ": not JSON");
  auto parsed = BundleFromJson(j);
  if (!parsed.ok()) return parsed.status().WithContext(path);
  Bundle b = std::move(*parsed);
  for (auto& f : b.files) {
    f.source = dir + "/" + f.path;
    std::error_code ec;
    const uint64_t size = fs::file_size(f.source, ec);
    if (ec || size != f.size) {
      return DataLossError(f.source + (ec ? " is missing" : " has " + std::to_string(size) +
                                                                " bytes, the manifest says " +
                                                                std::to_string(f.size)) +
                           ": the bundle is damaged; make it again");
    }
    if (!verify) continue;
    SPARK_ASSIGN_OR_RETURN(std::string sha, ssh::Sha256File(f.source));
    if (sha != f.sha256) {
      return DataLossError(f.source + " has SHA-256 " + sha + ", the manifest says " + f.sha256 +
                           ": the bundle is damaged; make it again");
    }
  }
  return b;
}

nlohmann::ordered_json BundleToJson(const Bundle& b) {
  nlohmann::ordered_json libs = nlohmann::ordered_json::object();
  for (const auto& [soname, provider] : b.needs.node_libraries) libs[soname] = provider;
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const auto& f : b.files) {
    files.push_back({{"path", f.path},
                     {"size", f.size},
                     {"mode", fmt::format("{:04o}", f.mode)},
                     {"sha256", f.sha256}});
  }
  return {{"schema", b.schema},
          {"machine", b.machine},
          {"version", b.version},
          {"cuda", b.cuda},
          {"needs",
           {{"glibc", b.needs.glibc},
            {"glibc_from", b.needs.glibc_from},
            {"glibcxx", b.needs.glibcxx},
            {"glibcxx_from", b.needs.glibcxx_from},
            {"node_libraries", libs}}},
          {"files", files}};
}

Result<Bundle> BundleFromJson(const nlohmann::json& j) {
  Bundle b;
  try {
    b.schema = j.at("schema").get<std::string>();
    if (b.schema != kBundleSchema) {
      return InvalidArgumentError("schema is '" + b.schema + "', this sparkctl reads " +
                                  kBundleSchema + " (make the bundle again with this sparkctl)");
    }
    b.machine = j.at("machine").get<std::string>();
    b.version = j.at("version").get<std::string>();
    b.cuda = j.at("cuda").get<bool>();
    const auto& n = j.at("needs");
    b.needs.glibc = n.at("glibc").get<std::string>();
    b.needs.glibc_from = n.at("glibc_from").get<std::string>();
    b.needs.glibcxx = n.at("glibcxx").get<std::string>();
    b.needs.glibcxx_from = n.at("glibcxx_from").get<std::string>();
    for (const auto& [soname, provider] : n.at("node_libraries").items()) {
      b.needs.node_libraries[soname] = provider.get<std::string>();
    }
    for (const auto& f : j.at("files")) {
      BundleFile file;
      file.path = f.at("path").get<std::string>();
      file.size = f.at("size").get<uint64_t>();
      file.mode = static_cast<int>(std::stoi(f.at("mode").get<std::string>(), nullptr, 8));
      file.sha256 = f.at("sha256").get<std::string>();
      if (!(StartsWith(file.path, "bin/") || StartsWith(file.path, "lib/")) ||
          file.path.find("..") != std::string::npos || file.path.find('/', 4) != std::string::npos) {
        return InvalidArgumentError("files: '" + file.path + "' is not bin/NAME or lib/NAME");
      }
      if (file.sha256.size() != 64 || file.sha256.find_first_not_of("0123456789abcdef") != std::string::npos) {
        return InvalidArgumentError("files: " + file.path + ": sha256 is not 64 hex digits");
      }
      b.files.push_back(std::move(file));
    }
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("malformed bundle manifest: ") + e.what());
  }
  return b;
}

}  // namespace spark::bundle
