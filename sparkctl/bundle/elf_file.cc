#include "sparkctl/bundle/elf_file.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "base/strings.h"

namespace spark::bundle {
namespace {

// An open file read at offsets; every read is bounds-checked against the file size.
class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}
  ~Reader() {
    if (fd_ >= 0) close(fd_);
  }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  Status Open() {
    fd_ = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return ErrnoError(errno, "cannot open " + path_);
    struct stat st;
    if (fstat(fd_, &st) != 0) return ErrnoError(errno, "cannot stat " + path_);
    size_ = static_cast<uint64_t>(st.st_size);
    return Status::Ok();
  }

  Status Read(uint64_t offset, void* out, uint64_t n) const {
    if (offset > size_ || n > size_ - offset) return Bad("a header points past the end");
    uint64_t done = 0;
    while (done < n) {
      ssize_t r = pread(fd_, static_cast<char*>(out) + done, n - done, offset + done);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return ErrnoError(r < 0 ? errno : EIO, "cannot read " + path_);
      done += static_cast<uint64_t>(r);
    }
    return Status::Ok();
  }

  template <typename T>
  Status ReadStruct(uint64_t offset, T* out) const {
    return Read(offset, out, sizeof(T));
  }

  Status Bad(const std::string& why) const {
    return InvalidArgumentError(path_ + ": not a usable ELF file: " + why);
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

std::string MachineName(uint16_t machine) {
  switch (machine) {
    case EM_X86_64: return "x86_64";
    case EM_AARCH64: return "aarch64";
    default: return "elf-machine-" + std::to_string(machine);
  }
}

// File offset of a virtual address, through the PT_LOAD segment that maps it.
std::optional<uint64_t> OffsetOf(const std::vector<Elf64_Phdr>& phdrs, uint64_t vaddr) {
  for (const auto& p : phdrs) {
    if (p.p_type == PT_LOAD && vaddr >= p.p_vaddr && vaddr < p.p_vaddr + p.p_filesz) {
      return p.p_offset + (vaddr - p.p_vaddr);
    }
  }
  return std::nullopt;
}

std::string StringAt(const std::string& strtab, uint64_t offset) {
  if (offset >= strtab.size()) return "";
  return std::string(strtab.c_str() + offset);
}

// Keeps the newer of `*current` and the version in `name` when it starts with `prefix`.
void KeepNewest(const std::string& name, std::string_view prefix, std::string* current) {
  if (!StartsWith(name, prefix)) return;
  std::string version = name.substr(prefix.size());
  if (version.empty() || version.find_first_not_of("0123456789.") != std::string::npos) return;
  if (CompareVersions(version, *current) > 0) *current = version;
}

// Walks the version-needed chain (Elf64_Verneed entries, each with Elf64_Vernaux entries).
Status ReadVersionNeeds(const Reader& reader, uint64_t offset, uint64_t count,
                        const std::string& strtab, ElfFile* elf) {
  for (uint64_t i = 0; i < count && i < 4096; ++i) {
    Elf64_Verneed need;
    SPARK_RETURN_IF_ERROR(reader.ReadStruct(offset, &need));
    uint64_t aux_offset = offset + need.vn_aux;
    for (uint16_t k = 0; k < need.vn_cnt; ++k) {
      Elf64_Vernaux aux;
      SPARK_RETURN_IF_ERROR(reader.ReadStruct(aux_offset, &aux));
      const std::string name = StringAt(strtab, aux.vna_name);
      KeepNewest(name, "GLIBC_", &elf->glibc);
      KeepNewest(name, "GLIBCXX_", &elf->glibcxx);
      if (aux.vna_next == 0) break;
      aux_offset += aux.vna_next;
    }
    if (need.vn_next == 0) break;
    offset += need.vn_next;
  }
  return Status::Ok();
}

Status ReadDynamic(const Reader& reader, const std::vector<Elf64_Phdr>& phdrs,
                   const Elf64_Phdr& dynamic, ElfFile* elf) {
  std::vector<Elf64_Dyn> entries(dynamic.p_filesz / sizeof(Elf64_Dyn));
  SPARK_RETURN_IF_ERROR(
      reader.Read(dynamic.p_offset, entries.data(), entries.size() * sizeof(Elf64_Dyn)));
  uint64_t strtab_addr = 0, strtab_size = 0, verneed_addr = 0, verneed_count = 0;
  std::vector<uint64_t> needed, rpath, runpath;
  std::optional<uint64_t> soname;
  for (const auto& d : entries) {
    switch (d.d_tag) {
      case DT_STRTAB: strtab_addr = d.d_un.d_ptr; break;
      case DT_STRSZ: strtab_size = d.d_un.d_val; break;
      case DT_NEEDED: needed.push_back(d.d_un.d_val); break;
      case DT_RPATH: rpath.push_back(d.d_un.d_val); break;
      case DT_RUNPATH: runpath.push_back(d.d_un.d_val); break;
      case DT_SONAME: soname = d.d_un.d_val; break;
      case DT_VERNEED: verneed_addr = d.d_un.d_ptr; break;
      case DT_VERNEEDNUM: verneed_count = d.d_un.d_val; break;
      default: break;
    }
    if (d.d_tag == DT_NULL) break;
  }
  if (strtab_addr == 0) return reader.Bad("the dynamic section has no string table");
  std::optional<uint64_t> strtab_offset = OffsetOf(phdrs, strtab_addr);
  if (!strtab_offset || strtab_size > (64u << 20)) return reader.Bad("bad DT_STRTAB");
  std::string strtab(strtab_size, '\0');
  SPARK_RETURN_IF_ERROR(reader.Read(*strtab_offset, strtab.data(), strtab_size));
  for (uint64_t n : needed) elf->needed.push_back(StringAt(strtab, n));
  for (uint64_t n : rpath) {
    for (auto& p : Split(StringAt(strtab, n), ':', true)) elf->rpath.push_back(p);
  }
  for (uint64_t n : runpath) {
    for (auto& p : Split(StringAt(strtab, n), ':', true)) elf->runpath.push_back(p);
  }
  if (soname) elf->soname = StringAt(strtab, *soname);
  if (verneed_addr != 0) {
    std::optional<uint64_t> at = OffsetOf(phdrs, verneed_addr);
    if (!at) return reader.Bad("bad DT_VERNEED");
    SPARK_RETURN_IF_ERROR(ReadVersionNeeds(reader, *at, verneed_count, strtab, elf));
  }
  return Status::Ok();
}

}  // namespace

Result<ElfFile> ReadElfFile(const std::string& path) {
  Reader reader(path);
  SPARK_RETURN_IF_ERROR(reader.Open());
  Elf64_Ehdr eh;
  if (!reader.ReadStruct(0, &eh).ok() || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    return reader.Bad("no ELF magic");
  }
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return reader.Bad("not 64-bit");
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return reader.Bad("not little-endian");
  if (eh.e_phentsize != sizeof(Elf64_Phdr)) return reader.Bad("unexpected program header size");
  ElfFile elf;
  elf.path = path;
  elf.machine = MachineName(eh.e_machine);
  std::vector<Elf64_Phdr> phdrs(eh.e_phnum);
  SPARK_RETURN_IF_ERROR(reader.Read(eh.e_phoff, phdrs.data(), phdrs.size() * sizeof(Elf64_Phdr)));
  for (const auto& p : phdrs) {
    if (p.p_type == PT_INTERP && p.p_filesz > 0 && p.p_filesz < 4096) {
      std::string interp(p.p_filesz, '\0');
      SPARK_RETURN_IF_ERROR(reader.Read(p.p_offset, interp.data(), p.p_filesz));
      elf.interpreter = interp.c_str();
    }
  }
  for (const auto& p : phdrs) {
    if (p.p_type == PT_DYNAMIC) SPARK_RETURN_IF_ERROR(ReadDynamic(reader, phdrs, p, &elf));
  }
  return elf;
}

std::string NormalizeMachine(std::string_view uname_m) {
  if (uname_m == "arm64") return "aarch64";
  if (uname_m == "amd64") return "x86_64";
  return std::string(uname_m);
}

int CompareVersions(std::string_view a, std::string_view b) {
  std::vector<std::string> x = Split(a, '.'), y = Split(b, '.');
  if (a.empty()) x.clear();
  if (b.empty()) y.clear();
  for (size_t i = 0; i < std::max(x.size(), y.size()); ++i) {
    int64_t u = i < x.size() ? ParseInt(x[i]).value_or(0) : -1;
    int64_t v = i < y.size() ? ParseInt(y[i]).value_or(0) : -1;
    if (u != v) return u < v ? -1 : 1;
  }
  return 0;
}

}  // namespace spark::bundle
