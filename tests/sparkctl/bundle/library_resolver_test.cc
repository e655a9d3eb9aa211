// ResolveLibraries against the dynamic loader itself (ldd runs it on this machine's programs).
#include "sparkctl/bundle/library_resolver.h"

#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "base/strings.h"
#include "tests/sparkctl/testing/shell.h"

namespace spark::bundle {
namespace {

namespace fs = std::filesystem;

const std::string kBin = SPARK_BINARY_DIR "/bin";

// soname -> real path of every library the loader maps for `program`.
std::map<std::string, std::string> Ldd(const std::string& program) {
  testing::Output o = testing::Shell("ldd " + program);
  EXPECT_EQ(o.exit_code, 0) << o.err;
  std::map<std::string, std::string> out;
  std::istringstream in(o.out);
  std::string name, arrow, path;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    if (words >> name >> arrow >> path && arrow == "=>") out[name] = fs::canonical(path).string();
  }
  return out;
}

TEST(LibraryResolverTest, NodeProvidesOnlyTheRuntimesTheDriverAndRdmaCore) {
  struct Case {
    const char* soname;
    const char* provider;
  };
  for (const Case& c : {Case{"libc.so.6", "glibc"}, Case{"ld-linux-aarch64.so.1", "glibc"},
                        Case{"libm.so.6", "glibc"}, Case{"libstdc++.so.6", "the GCC runtime"},
                        Case{"libgcc_s.so.1", "the GCC runtime"},
                        Case{"libcuda.so.1", "the NVIDIA driver"},
                        Case{"libnvidia-ml.so.1", "the NVIDIA driver"},
                        Case{"libibverbs.so.1", "rdma-core"}, Case{"libssh.so.4", ""},
                        Case{"libyaml-cpp.so.0.7", ""}, Case{"libcrypto.so.3", ""},
                        Case{"libcublasLt.so.13", ""}, Case{"libnccl.so.2", ""},
                        Case{"libcudart.so.13", ""}, Case{"libgomp.so.1", ""}}) {
    EXPECT_EQ(NodeProvider(c.soname), c.provider) << c.soname;
  }
}

// Every library the loader maps is either bundled (the very file the loader picks) or provided
// by the node, or pulled in only by a node-provided library (libibverbs' libnl).
TEST(LibraryResolverTest, FindsWhatTheLoaderFindsForEachProgram) {
  for (const char* program : {"sparkctl", "spark-engine", "spark-bench"}) {
    SCOPED_TRACE(program);
    const std::string path = kBin + "/" + program;
    auto libs = ResolveLibraries({path}, {});
    ASSERT_TRUE(libs.ok()) << libs.status().ToString();
    EXPECT_EQ(libs->machine, HostMachine());
    const auto loaded = Ldd(path);
    for (const auto& [soname, file] : libs->bundled) {
      ASSERT_TRUE(loaded.count(soname)) << soname << " is bundled but the loader does not map it";
      EXPECT_EQ(file, loaded.at(soname)) << soname;
      EXPECT_EQ(NodeProvider(soname), "");
    }
    for (const auto& [soname, file] : loaded) {
      if (libs->bundled.count(soname) || !NodeProvider(soname).empty()) continue;
      EXPECT_TRUE(StartsWith(soname, "libnl-")) << soname << " (" << file
                                                << ") is loaded but neither bundled nor the node's";
    }
    EXPECT_TRUE(libs->from_node.count("libc.so.6"));
    EXPECT_FALSE(libs->glibc.empty());
  }
  auto ctl = ResolveLibraries({kBin + "/sparkctl"}, {});
  ASSERT_TRUE(ctl.ok());
  for (const char* soname : {"libssh.so.4", "libspdlog.so.1.10", "libcrypto.so.3"}) {
    EXPECT_TRUE(ctl->bundled.count(soname)) << soname;
  }
}

TEST(LibraryResolverTest, MissingLibraryNamesWhoNeedsItAndWhereItLooked) {
  const std::string program = kBin + "/sparkctl";
  auto libs = ResolveLibraries({program}, {.extra_dirs = {"/nonexistent-lib"}, .system_dirs = false});
  ASSERT_EQ(libs.status().code(), StatusCode::kNotFound);
  const std::string& m = libs.status().message();
  EXPECT_NE(m.find(program + " needs lib"), std::string::npos) << m;
  EXPECT_NE(m.find("/nonexistent-lib"), std::string::npos) << m;
}

TEST(LibraryResolverTest, ExtraDirsComeBeforeTheSystemAndOtherMachinesAreSkipped) {
  const std::string dir = fs::temp_directory_path() / ("resolver." + std::to_string(getpid()));
  fs::create_directories(dir + "/mine");
  fs::create_directories(dir + "/arm");
  auto system = ResolveLibraries({kBin + "/sparkctl"}, {});
  ASSERT_TRUE(system.ok());
  const std::string real_ssh = system->bundled.at("libssh.so.4");
  fs::copy_file(real_ssh, dir + "/mine/libssh.so.4");
  // An aarch64 header under the same name must be passed over, as the loader does.
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_machine = HostMachine() == "aarch64" ? EM_X86_64 : EM_AARCH64;
  eh.e_phentsize = sizeof(Elf64_Phdr);
  std::ofstream(dir + "/arm/libssh.so.4", std::ios::binary)
      .write(reinterpret_cast<const char*>(&eh), sizeof eh);
  auto libs = ResolveLibraries({kBin + "/sparkctl"},
                               {.extra_dirs = {dir + "/arm", dir + "/mine"}});
  ASSERT_TRUE(libs.ok()) << libs.status().ToString();
  EXPECT_EQ(libs->bundled.at("libssh.so.4"), fs::canonical(dir + "/mine/libssh.so.4").string());
  fs::remove_all(dir);
}

TEST(LibraryResolverTest, OneMachinePerCall) {
  const std::string dir = fs::temp_directory_path() / ("resolver2." + std::to_string(getpid()));
  fs::create_directories(dir);
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_machine = HostMachine() == "aarch64" ? EM_X86_64 : EM_AARCH64;
  eh.e_phentsize = sizeof(Elf64_Phdr);
  std::ofstream(dir + "/other", std::ios::binary).write(reinterpret_cast<const char*>(&eh), sizeof eh);
  auto libs = ResolveLibraries({kBin + "/sparkctl", dir + "/other"}, {});
  EXPECT_EQ(libs.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(libs.status().message().find("one bundle holds programs of one machine"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(LibraryResolverTest, ReadsLdSoConfIncludes) {
  const std::string dir = fs::temp_directory_path() / ("ldconf." + std::to_string(getpid()));
  fs::create_directories(dir + "/conf.d");
  fs::create_directories(dir + "/libs-a");
  fs::create_directories(dir + "/libs-b");
  std::ofstream(dir + "/ld.so.conf") << "# comment\ninclude conf.d/*.conf\n" << dir << "/libs-a\n";
  std::ofstream(dir + "/conf.d/x.conf") << dir << "/libs-b  # trailing comment\n";
  std::vector<std::string> dirs = SystemLibraryDirs(HostMachine(), dir + "/ld.so.conf");
  ASSERT_GE(dirs.size(), 2u);
  EXPECT_EQ(dirs[0], dir + "/libs-b");
  EXPECT_EQ(dirs[1], dir + "/libs-a");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace spark::bundle
