// ElfFile against binutils' readelf (an independent reader) on real files of this machine, and
// synthetic headers for the machines this machine's files cannot show.
#include "sparkctl/bundle/elf_file.h"

#include <elf.h>
#include <gnu/libc-version.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "sparkctl/bundle/library_resolver.h"
#include "tests/sparkctl/testing/shell.h"

namespace spark::bundle {
namespace {

namespace fs = std::filesystem;

const std::string kSparkctl = SPARK_BINARY_DIR "/bin/sparkctl";

std::string TempDir() {
  std::string dir = fs::temp_directory_path() / ("elf_test." + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir;
}

// The dynamic entries of `tag` ("NEEDED", "RPATH", "SONAME") as readelf -d prints them.
std::vector<std::string> ReadelfDynamic(const std::string& path, const std::string& tag) {
  testing::Output o = testing::Shell("readelf -dW " + path);
  EXPECT_EQ(o.exit_code, 0) << "readelf (binutils) is needed: " << o.err;
  std::vector<std::string> out;
  std::regex line("\\(" + tag + "\\)[^\\[]*\\[([^\\]]*)\\]");
  for (std::sregex_iterator it(o.out.begin(), o.out.end(), line), end; it != end; ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

// The newest GLIBC_ version readelf -V lists among the file's version needs.
std::string ReadelfNewest(const std::string& path, const std::string& prefix) {
  testing::Output o = testing::Shell("readelf -VW " + path);
  std::string newest;
  std::regex name("Name: " + prefix + "([0-9.]+)");
  for (std::sregex_iterator it(o.out.begin(), o.out.end(), name), end; it != end; ++it) {
    if (CompareVersions((*it)[1].str(), newest) > 0) newest = (*it)[1];
  }
  return newest;
}

void WriteHeader(const std::string& path, uint16_t machine, unsigned char cls = ELFCLASS64) {
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = cls;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_EXEC;
  eh.e_machine = machine;
  eh.e_phentsize = sizeof(Elf64_Phdr);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(&eh), sizeof eh);
}

TEST(ElfFileTest, AgreesWithReadelfOnThisMachinesFiles) {
  auto libs = ResolveLibraries({kSparkctl}, {});
  ASSERT_TRUE(libs.ok()) << libs.status().ToString();
  std::vector<std::string> files = {kSparkctl, fs::read_symlink("/proc/self/exe").string()};
  for (const auto& [soname, path] : libs->bundled) files.push_back(path);
  ASSERT_GE(files.size(), 5u);
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    auto elf = ReadElfFile(path);
    ASSERT_TRUE(elf.ok()) << elf.status().ToString();
    EXPECT_EQ(elf->machine, HostMachine());
    EXPECT_EQ(elf->needed, ReadelfDynamic(path, "NEEDED"));
    std::vector<std::string> soname = ReadelfDynamic(path, "SONAME");
    EXPECT_EQ(elf->soname, soname.empty() ? "" : soname[0]);
    std::vector<std::string> rpath = ReadelfDynamic(path, "RPATH");
    std::string joined;
    for (const auto& r : elf->rpath) joined += (joined.empty() ? "" : ":") + r;
    EXPECT_EQ(joined, rpath.empty() ? "" : rpath[0]);
    EXPECT_EQ(elf->glibc, ReadelfNewest(path, "GLIBC_"));
    EXPECT_EQ(elf->glibcxx, ReadelfNewest(path, "GLIBCXX_"));
  }
}

TEST(ElfFileTest, ProgramsCarryTheBundleRpathAndAnInterpreter) {
  auto elf = ReadElfFile(kSparkctl);
  ASSERT_TRUE(elf.ok()) << elf.status().ToString();
  EXPECT_EQ(elf->rpath, std::vector<std::string>{"$ORIGIN/../lib"});
  EXPECT_TRUE(elf->runpath.empty()) << "DT_RUNPATH would not serve the libraries' own needs";
  EXPECT_FALSE(elf->interpreter.empty());
  EXPECT_TRUE(elf->soname.empty());
  // What this process's glibc is must be at least what sparkctl asks for (it runs here).
  EXPECT_LE(CompareVersions(elf->glibc, gnu_get_libc_version()), 0);
}

TEST(ElfFileTest, NamesTheMachineOfEachHeader) {
  const std::string dir = TempDir();
  struct Case {
    uint16_t machine;
    std::string name;
  };
  for (const Case& c : {Case{EM_X86_64, "x86_64"}, Case{EM_AARCH64, "aarch64"},
                        Case{EM_RISCV, "elf-machine-243"}}) {
    const std::string path = dir + "/" + c.name;
    WriteHeader(path, c.machine);
    auto elf = ReadElfFile(path);
    ASSERT_TRUE(elf.ok()) << elf.status().ToString();
    EXPECT_EQ(elf->machine, c.name);
    EXPECT_TRUE(elf->needed.empty());
  }
  fs::remove_all(dir);
}

TEST(ElfFileTest, RefusesWhatIsNotA64BitElf) {
  const std::string dir = TempDir();
  std::ofstream(dir + "/text") << "#!/bin/sh\necho hi\n";
  WriteHeader(dir + "/elf32", EM_386, ELFCLASS32);
  auto text = ReadElfFile(dir + "/text");
  EXPECT_EQ(text.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(text.status().message().find(dir + "/text"), std::string::npos);
  EXPECT_EQ(ReadElfFile(dir + "/elf32").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadElfFile(dir + "/missing").status().code(), StatusCode::kNotFound);
  fs::remove_all(dir);
}

TEST(ElfFileTest, ComparesDottedVersionsNumerically) {
  struct Case {
    const char* a;
    const char* b;
    int sign;
  };
  for (const Case& c : {Case{"2.39", "2.4", 1}, Case{"2.34", "2.34", 0}, Case{"3.4.9", "3.4.30", -1},
                        Case{"", "2.2.5", -1}, Case{"2.17", "", 1}, Case{"", "", 0}}) {
    const int got = CompareVersions(c.a, c.b);
    EXPECT_EQ((got > 0) - (got < 0), c.sign) << c.a << " vs " << c.b;
  }
  EXPECT_EQ(NormalizeMachine("arm64"), "aarch64");
  EXPECT_EQ(NormalizeMachine("amd64"), "x86_64");
  EXPECT_EQ(NormalizeMachine("aarch64"), "aarch64");
}

}  // namespace
}  // namespace spark::bundle
