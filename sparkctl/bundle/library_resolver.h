// Which shared libraries a set of programs needs, found the way the dynamic loader would find
// them, and split into the ones a bundle must carry and the ones the node provides.
//
// A node provides only its C and C++ runtime (glibc, libstdc++, libgcc_s), the NVIDIA driver's
// libraries (libcuda, libnvidia-*) and the RDMA stack (libibverbs, librdmacm: rdma-core's
// providers are plugins of the node's own libibverbs and must match its kernel driver, so a
// bundled copy could not load them). Everything else — libssh, yaml-cpp, spdlog, fmt, gloo,
// ICU, OpenSSL, and in CUDA builds cuBLAS and NCCL — goes into the bundle.
//
// Search order for a library needed by object O (like ld.so): O's DT_RPATH (when O has no
// DT_RUNPATH) and the program's DT_RPATH, O's DT_RUNPATH, the caller's extra folders, then the
// system folders for the programs' machine: for the host's own machine those of
// /etc/ld.so.conf and the multiarch folders, for another machine its multiarch folders
// (/usr/lib/aarch64-linux-gnu, ...) and the cross toolchain's (/usr/aarch64-linux-gnu/lib).
// $ORIGIN expands to the folder of O. Files of another machine are skipped.
// Thread-safety: functions only.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "sparkctl/bundle/elf_file.h"

namespace spark::bundle {

// What provides `soname` on a node ("glibc", "the GCC runtime", "the NVIDIA driver",
// "rdma-core"), or "" when a bundle must carry it.
std::string NodeProvider(std::string_view soname);

struct ResolveOptions {
  std::vector<std::string> extra_dirs;  // searched after the objects' own paths
  bool system_dirs = true;              // then the system folders (false in tests)
  std::string ld_so_conf = "/etc/ld.so.conf";  // for the host's own machine
};

struct ResolvedLibraries {
  std::string machine;
  // soname -> the real path of the file to bundle, for every library not provided by the node.
  std::map<std::string, std::string> bundled;
  // soname -> provider, for every node-provided library some object needs.
  std::map<std::string, std::string> from_node;
  // The newest glibc / libstdc++ version any program or bundled library asks for, and which
  // file asks for it ("" when none).
  std::string glibc, glibc_from, glibcxx, glibcxx_from;
};

// Resolves the libraries of `programs` (all of one machine) and of the libraries they pull
// in. InvalidArgument when the programs are of different machines or one is not ELF;
// NotFound naming the library and the object that needs it, and the folders searched.
Result<ResolvedLibraries> ResolveLibraries(const std::vector<std::string>& programs,
                                           const ResolveOptions& options);

// The system folders searched for `machine` (see above), existing ones only.
std::vector<std::string> SystemLibraryDirs(const std::string& machine,
                                           const std::string& ld_so_conf);

// The machine this process runs on, as ElfFile names it.
std::string HostMachine();

}  // namespace spark::bundle
