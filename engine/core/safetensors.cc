#include "engine/core/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

namespace spark::engine::core {
namespace {

// Headers larger than this are certainly corrupt (real checkpoints stay below a few MB).
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Status ParseTensorEntry(const std::string& path, const std::string& name,
                        const nlohmann::json& entry, TensorInfo* info) {
  const std::string where = path + ": tensor '" + name + "': ";
  if (!entry.is_object()) return DataLossError(where + "header entry is not an object");
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(key)) return DataLossError(where + "header entry lacks '" + key + "'");
  }
  if (!entry["dtype"].is_string()) return DataLossError(where + "'dtype' is not a string");
  Result<DType> dtype = ParseDType(entry["dtype"].get<std::string>());
  if (!dtype.ok()) return dtype.status().WithContext(where.substr(0, where.size() - 2));
  info->name = name;
  info->dtype = *dtype;
  if (!entry["shape"].is_array()) return DataLossError(where + "'shape' is not an array");
  for (const nlohmann::json& d : entry["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return DataLossError(where + "'shape' holds a negative or non-integer dimension");
    }
    info->shape.push_back(d.get<int64_t>());
  }
  const nlohmann::json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    return DataLossError(where + "'data_offsets' must be two non-negative integers");
  }
  info->begin = offsets[0].get<uint64_t>();
  info->end = offsets[1].get<uint64_t>();
  return Status::Ok();
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Status ValidateTensorTable(const std::string& path,
                           const std::map<std::string, TensorInfo>& tensors, uint64_t data_size) {
  std::vector<const TensorInfo*> by_offset;
  for (const auto& [name, info] : tensors) {
    const std::string where = path + ": tensor '" + name + "': ";
    if (info.begin > info.end) return DataLossError(where + "data_offsets begin > end");
    const uint64_t expected = static_cast<uint64_t>(info.numel()) * DTypeSize(info.dtype);
    if (info.end - info.begin != expected) {
      return DataLossError(where + "holds " + std::to_string(info.end - info.begin) +
                           " bytes but shape " + ShapeString(info.shape) + " of " +
                           std::string(DTypeName(info.dtype)) + " needs " +
                           std::to_string(expected) + "; the file is corrupt, re-download it");
    }
    if (info.end > data_size) {
      return DataLossError(where + "ends at byte " + std::to_string(info.end) +
                           " but the data section has " + std::to_string(data_size) +
                           " bytes; the file is truncated, re-download it");
    }
    by_offset.push_back(&info);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end) {
      return DataLossError(path + ": tensors '" + by_offset[i - 1]->name + "' and '" +
                           by_offset[i]->name + "' overlap; the file is corrupt");
    }
  }
  return Status::Ok();
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoError(err, path);
  }
  file->map_size_ = static_cast<size_t>(st.st_size);
  if (file->map_size_ < 8) {
    ::close(fd);
    return DataLossError(path + ": " + std::to_string(file->map_size_) +
                         " bytes is too short for a safetensors file (the file is truncated)");
  }
  void* map = ::mmap(nullptr, file->map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    return ErrnoError(err, "mmap " + path);
  }
  file->fd_ = fd;
  file->map_ = static_cast<const uint8_t*>(map);

  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | file->map_[i];
  if (header_size > kMaxHeaderBytes || header_size > file->map_size_ - 8) {
    return DataLossError(path + ": header length " + std::to_string(header_size) +
                         " exceeds the file size " + std::to_string(file->map_size_) +
                         " (the file is truncated or not a safetensors file)");
  }
  file->data_offset_ = 8 + header_size;
  std::string header(reinterpret_cast<const char*>(file->map_ + 8), header_size);
  SPARK_RETURN_IF_ERROR(file->ParseHeader(header));
  SPARK_RETURN_IF_ERROR(
      ValidateTensorTable(path, file->tensors_, file->map_size_ - file->data_offset_));
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), map_size_);
  if (fd_ >= 0) ::close(fd_);
}

Status SafetensorsFile::ParseHeader(const std::string& header_json) {
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_json);
  } catch (const nlohmann::json::exception& e) {
    return DataLossError(path_ + ": header is not valid JSON (" + e.what() + ")");
  }
  if (!header.is_object()) return DataLossError(path_ + ": header is not a JSON object");
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return DataLossError(path_ + ": __metadata__ is not an object");
      for (const auto& [k, v] : entry.items()) {
        metadata_[k] = v.is_string() ? v.get<std::string>() : v.dump();
      }
      continue;
    }
    TensorInfo info;
    SPARK_RETURN_IF_ERROR(ParseTensorEntry(path_, name, entry, &info));
    tensors_.emplace(name, std::move(info));
  }
  return Status::Ok();
}

const TensorInfo* SafetensorsFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Result<std::span<const uint8_t>> SafetensorsFile::RawBytes(const std::string& name) const {
  const TensorInfo* info = Find(name);
  if (info == nullptr) return NotFoundError(path_ + ": no tensor '" + name + "'");
  return std::span<const uint8_t>(map_ + data_offset_ + info->begin, info->end - info->begin);
}

Result<std::vector<int64_t>> SafetensorsFile::SliceShape(const TensorInfo& info,
                                                         const TensorSlice& slice) const {
  std::vector<int64_t> shape = info.shape;
  if (slice.length < 0) return shape;
  if (slice.dim < 0 || slice.dim >= static_cast<int>(shape.size()) || slice.start < 0 ||
      slice.start + slice.length > shape[slice.dim]) {
    return InvalidArgumentError(
        path_ + ": tensor '" + info.name + "' of shape " + ShapeString(shape) + " has no slice [" +
        std::to_string(slice.start) + ", " + std::to_string(slice.start + slice.length) +
        ") in dimension " + std::to_string(slice.dim));
  }
  shape[slice.dim] = slice.length;
  return shape;
}

Result<std::vector<float>> SafetensorsFile::ReadFloat(const std::string& name,
                                                      const TensorSlice& slice) const {
  const TensorInfo* info = Find(name);
  if (info == nullptr) return NotFoundError(path_ + ": no tensor '" + name + "'");
  SPARK_ASSIGN_OR_RETURN(std::vector<int64_t> shape, SliceShape(*info, slice));
  const size_t elem = DTypeSize(info->dtype);
  const uint8_t* base = map_ + data_offset_ + info->begin;
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  std::vector<float> out(static_cast<size_t>(numel));
  if (slice.length < 0) {
    ConvertToFloat(info->dtype, base, out.size(), out.data());
    return out;
  }
  // outer blocks of [dim extent x inner] elements; copy `length` rows of `inner` from each.
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < slice.dim; ++i) outer *= info->shape[i];
  for (size_t i = slice.dim + 1; i < info->shape.size(); ++i) inner *= info->shape[i];
  const int64_t extent = info->shape[slice.dim];
  const int64_t run = slice.length * inner;
  for (int64_t o = 0; o < outer; ++o) {
    const uint8_t* src = base + ((o * extent + slice.start) * inner) * elem;
    ConvertToFloat(info->dtype, src, static_cast<size_t>(run), out.data() + o * run);
  }
  return out;
}

}  // namespace spark::engine::core
