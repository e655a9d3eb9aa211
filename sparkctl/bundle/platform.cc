#include "sparkctl/bundle/platform.h"

#include <algorithm>

#include "base/strings.h"

namespace spark::bundle {
namespace {

// Why a node provides a library, and how to get it there.
std::string InstallHint(const std::string& soname, const std::string& provider) {
  if (provider == "rdma-core") {
    return "install the RDMA stack (DGX OS ships it; on Ubuntu/Debian: apt install "
           "ibverbs-providers rdma-core " +
           std::string(soname.starts_with("librdmacm") ? "librdmacm1" : "libibverbs1") + ")";
  }
  if (provider == "the NVIDIA driver") {
    return "install the NVIDIA driver (DGX OS ships it; check `nvidia-smi` on the node)";
  }
  if (provider == "the GCC runtime") return "install libstdc++6 (apt install libstdc++6)";
  return "install " + provider;
}

std::string OlderThanHint(const std::string& what, const std::string& node_version,
                          const std::string& needed) {
  return "build the bundle on a system whose " + what + " is not newer than " + node_version +
         " (a bundle needs the " + what + " it was built against, " + needed +
         " here; DGX OS 7 has glibc 2.39 and GLIBCXX 3.4.33, Debian 12 builds need 2.36 and "
         "3.4.30), or upgrade the node";
}

}  // namespace

std::string NodePlatform::Describe() const {
  std::string out = machine.empty() ? "unknown machine" : machine;
  out += ", " + (os_name.empty() ? std::string("unknown OS") : os_name);
  out += ", glibc " + (glibc.empty() ? std::string("unknown") : glibc);
  return out;
}

bool NodePlatform::HasLibrary(const std::string& soname) const {
  return std::find(libraries.begin(), libraries.end(), soname) != libraries.end();
}

std::string PlatformProbeScript() {
  std::string libs;
  for (const char* l : kProbedLibraries) libs += std::string(" ") + l;
  // Subshell for os-release: it sets variables. grep -a reads libstdc++'s version strings.
  return R"SH(m=$(uname -m)
echo "machine=$m"
echo "glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null)"
( [ -r /etc/os-release ] && . /etc/os-release
  echo "os_id=${ID:-}"; echo "os_version=${VERSION_ID:-}"; echo "os_name=${PRETTY_NAME:-}" )
cxx=
for l in)SH" + libs + R"SH(; do
  for d in /lib/$m-linux-gnu /usr/lib/$m-linux-gnu /lib64 /usr/lib64 /lib /usr/lib; do
    if [ -e "$d/$l" ]; then
      echo "library=$l"
      [ "$l" = libstdc++.so.6 ] && [ -z "$cxx" ] && cxx="$d/$l"
      break
    fi
  done
done
[ -n "$cxx" ] && echo "glibcxx=$(grep -ao 'GLIBCXX_3\.4\.[0-9]*' "$cxx" | sort -u -t. -k3,3n | tail -n 1)"
true
)SH";
}

Result<NodePlatform> ParsePlatform(const std::string& node, const std::string& text) {
  NodePlatform p;
  for (const std::string& line : Split(text, '\n', true)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq);
    const std::string value(Trim(line.substr(eq + 1)));
    if (key == "machine") p.machine = NormalizeMachine(value);
    else if (key == "glibc") p.glibc = StartsWith(value, "glibc ") ? value.substr(6) : value;
    else if (key == "os_id") p.os_id = value;
    else if (key == "os_version") p.os_version = value;
    else if (key == "os_name") p.os_name = value;
    else if (key == "library") p.libraries.push_back(value);
    else if (key == "glibcxx") p.glibcxx = StartsWith(value, "GLIBCXX_") ? value.substr(8) : value;
  }
  if (p.machine.empty()) {
    return InvalidArgumentError(node + ": the platform probe printed no machine (uname -m): " +
                                text.substr(0, 200));
  }
  return p;
}

Status CheckRunnable(const Bundle& b, const NodePlatform& p, const std::string& node) {
  const std::string what = node + " (" + p.Describe() + ")";
  if (b.machine != p.machine) {
    return FailedPreconditionError(what + " cannot run the " + b.machine + " programs of " +
                                   b.Describe() + ": use a bundle made for " + p.machine);
  }
  std::vector<std::string> problems;
  if (!b.needs.glibc.empty()) {
    if (p.glibc.empty()) {
      problems.push_back("its C library is not glibc or is unknown (getconf GNU_LIBC_VERSION "
                         "printed nothing); the programs need glibc " + b.needs.glibc);
    } else if (CompareVersions(p.glibc, b.needs.glibc) < 0) {
      problems.push_back("glibc " + p.glibc + " is older than " + b.needs.glibc + ", which " +
                         b.needs.glibc_from + " needs: " +
                         OlderThanHint("glibc", p.glibc, b.needs.glibc));
    }
  }
  if (!b.needs.glibcxx.empty()) {
    if (!p.HasLibrary("libstdc++.so.6")) {
      problems.push_back("it has no libstdc++.so.6: " +
                         InstallHint("libstdc++.so.6", "the GCC runtime"));
    } else if (CompareVersions(p.glibcxx, b.needs.glibcxx) < 0) {
      problems.push_back("its libstdc++ provides GLIBCXX " +
                         (p.glibcxx.empty() ? std::string("(none found)") : p.glibcxx) +
                         ", older than " + b.needs.glibcxx + ", which " + b.needs.glibcxx_from +
                         " needs: " + OlderThanHint("libstdc++", p.glibcxx, b.needs.glibcxx));
    }
  }
  for (const auto& [soname, provider] : b.needs.node_libraries) {
    const bool probed = std::any_of(std::begin(kProbedLibraries), std::end(kProbedLibraries),
                                    [&](const char* l) { return soname == l; });
    if (probed && soname != "libstdc++.so.6" && !p.HasLibrary(soname)) {
      problems.push_back("it has no " + soname + " (from " + provider +
                         "; bundles never carry it): " + InstallHint(soname, provider));
    }
  }
  if (problems.empty()) return Status::Ok();
  return FailedPreconditionError(what + " cannot run " + b.Describe() + ":\n  " +
                                 Join(problems, "\n  "));
}

nlohmann::ordered_json PlatformToJson(const NodePlatform& p) {
  return {{"machine", p.machine}, {"os_id", p.os_id},     {"os_version", p.os_version},
          {"os_name", p.os_name}, {"glibc", p.glibc},     {"glibcxx", p.glibcxx},
          {"libraries", p.libraries}};
}

Result<NodePlatform> PlatformFromJson(const nlohmann::json& j) {
  NodePlatform p;
  try {
    p.machine = j.at("machine").get<std::string>();
    p.os_id = j.at("os_id").get<std::string>();
    p.os_version = j.at("os_version").get<std::string>();
    p.os_name = j.at("os_name").get<std::string>();
    p.glibc = j.at("glibc").get<std::string>();
    p.glibcxx = j.at("glibcxx").get<std::string>();
    p.libraries = j.at("libraries").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(std::string("platform: ") + e.what());
  }
  return p;
}

}  // namespace spark::bundle
