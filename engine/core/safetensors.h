// Reading one .safetensors file: the header is parsed and validated once, the data is mmapped,
// and tensors (or one slice of a tensor along one dimension) are converted to fp32 on request,
// so a tensor-parallel rank touches only the pages of its own shards.
//
// Format: 8-byte little-endian header length N, N bytes of JSON {name: {dtype, shape,
// data_offsets: [begin, end]}, "__metadata__": {...}}, then the data; offsets are relative to the
// start of the data. Validation rejects bad JSON, unknown dtypes, sizes that disagree with the
// shape, tensors outside the file and overlapping tensors, naming the file and the tensor.
// Thread-safety: after Open, all const methods may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/core/dtype.h"

namespace spark::engine::core {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offset of the first element, relative to the data section
  uint64_t end = 0;    // one past the last byte

  int64_t numel() const;
};

// Part of a tensor along one dimension: indices [start, start + length) of dimension `dim`.
// The default (length < 0) means the whole tensor.
struct TensorSlice {
  int dim = 0;
  int64_t start = 0;
  int64_t length = -1;

  static TensorSlice Whole() { return {}; }
  static TensorSlice Rows(int64_t start, int64_t length) { return {0, start, length}; }
  static TensorSlice Cols(int64_t start, int64_t length) { return {1, start, length}; }
};

class SafetensorsFile {
 public:
  // Maps `path` and validates its header. NotFound/PermissionDenied from the OS; DataLoss for a
  // truncated or malformed file; InvalidArgument for an unsupported dtype.
  static Result<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);

  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // nullptr when the file has no tensor of that name.
  const TensorInfo* Find(const std::string& name) const;

  // The slice's elements in row-major order, as fp32. NotFound for an unknown tensor,
  // InvalidArgument for a slice outside the tensor's shape.
  Result<std::vector<float>> ReadFloat(const std::string& name, const TensorSlice& slice) const;

  // The tensor's bytes as stored (little-endian, dtype of its TensorInfo), for loaders that
  // convert themselves (packed FP4, block scales, integer tables). Valid while the file lives.
  // NotFound for an unknown tensor.
  Result<std::span<const uint8_t>> RawBytes(const std::string& name) const;
  // The open file (read-only) and the file offset of a byte inside the mapping, for readers
  // that pread instead of touching the mapping (no page faults; see Checkpoint::RawRegion).
  int fd() const { return fd_; }
  uint64_t FileOffset(const uint8_t* p) const { return static_cast<uint64_t>(p - map_); }

  // Shape of a slice of `info` (validates the slice). InvalidArgument when out of range.
  Result<std::vector<int64_t>> SliceShape(const TensorInfo& info, const TensorSlice& slice) const;

 private:
  SafetensorsFile() = default;
  Status ParseHeader(const std::string& header_json);

  std::string path_;
  const uint8_t* map_ = nullptr;
  int fd_ = -1;
  size_t map_size_ = 0;
  size_t data_offset_ = 0;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Checks a parsed tensor table against a data section of `data_size` bytes: each size matches
// shape x dtype, each tensor lies inside the data, no two tensors overlap. DataLoss naming
// `path` and the tensor otherwise.
Status ValidateTensorTable(const std::string& path,
                           const std::map<std::string, TensorInfo>& tensors, uint64_t data_size);

}  // namespace spark::engine::core
