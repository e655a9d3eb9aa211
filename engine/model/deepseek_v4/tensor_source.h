// TensorSource: raw access to the tensors of a DeepSeek-V4 checkpoint directory, whatever their
// element type. The released checkpoints hold tensors that are not plain fp32 arrays (F8_E8M0
// block scales, packed FP4 experts stored as I8, I64/I32 hash-routing tables), so the weight
// loader takes bytes plus dtype and shape and converts them itself (block_quant.h for the
// quantised ones).
//
// Reads model.safetensors, or every shard named by model.safetensors.index.json, through the
// engine's safetensors reader (engine/core/safetensors.h: header validation, mmap); this class
// only joins the shards into one name table.
// Thread-safety: read-only after Open.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/core/safetensors.h"

namespace spark::engine::model::dsv4 {

struct RawTensor {
  std::string name;
  std::string dtype;  // safetensors name: "F32", "BF16", "F8_E4M3", "F8_E8M0", "I8", "I64", ...
  size_t element_size = 0;  // bytes per element of `dtype`
  std::vector<int64_t> shape;
  std::span<const uint8_t> bytes;
  std::string file;  // for error messages
};

class TensorSource {
 public:
  // NotFound when `dir` has neither model.safetensors nor the index (or the index names a
  // missing shard); DataLoss naming the file and tensor for a malformed header or index, or a
  // tensor held by two shards; InvalidArgument for an unsupported dtype.
  static Result<std::unique_ptr<TensorSource>> Open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  // nullptr when no shard holds `name`.
  const RawTensor* Find(const std::string& name) const;
  const std::map<std::string, RawTensor>& tensors() const { return tensors_; }
  // Bytes of every tensor of every shard, as stored.
  uint64_t total_bytes() const;

 private:
  TensorSource() = default;
  Status OpenFile(const std::string& path);

  std::string dir_;
  std::vector<std::unique_ptr<core::SafetensorsFile>> files_;
  std::map<std::string, RawTensor> tensors_;
};

// "[a, b]".
std::string ShapeText(const std::vector<int64_t>& shape);

}  // namespace spark::engine::model::dsv4
