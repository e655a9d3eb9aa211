// ElfFile: what a bundle needs to know about one executable or shared library, read from its ELF
// headers without running it (so it works for another architecture's files): the machine, the
// libraries it needs (DT_NEEDED), where it looks for them (DT_RPATH / DT_RUNPATH), its soname,
// and the newest glibc and libstdc++ symbol versions it asks for (from .gnu.version_r), which
// say how old a node's C and C++ runtime may be.
//
// Only 64-bit little-endian ELF (x86-64 and aarch64, the machines sparkctl runs on).
// Thread-safety: functions only.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace spark::bundle {

struct ElfFile {
  std::string path;
  std::string machine;      // "x86_64", "aarch64", or "elf-machine-<n>" for others
  std::string interpreter;  // PT_INTERP ("/lib/ld-linux-aarch64.so.1"), "" for a library
  std::string soname;       // DT_SONAME, "" for an executable
  std::vector<std::string> needed;  // DT_NEEDED, in order
  std::vector<std::string> rpath;   // DT_RPATH entries, unexpanded ("$ORIGIN/../lib")
  std::vector<std::string> runpath; // DT_RUNPATH entries, unexpanded
  // Newest version asked of each runtime, "" when none: "2.34" from GLIBC_2.34, "3.4.30"
  // from GLIBCXX_3.4.30.
  std::string glibc;
  std::string glibcxx;
};

// Reads the headers of `path`. NotFound / PermissionDenied from open; InvalidArgument naming
// the file when it is not a 64-bit little-endian ELF or its dynamic section is malformed.
Result<ElfFile> ReadElfFile(const std::string& path);

// The machine name ElfFile uses for uname -m's answer ("arm64" -> "aarch64",
// "amd64" -> "x86_64"); other names unchanged.
std::string NormalizeMachine(std::string_view uname_m);

// Dotted-number comparison ("2.39" > "2.4", "3.4.30" > "3.4.9"): <0, 0, >0. "" is the oldest.
int CompareVersions(std::string_view a, std::string_view b);

}  // namespace spark::bundle
