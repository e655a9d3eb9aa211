// A Hugging Face checkpoint directory: model.safetensors, or the shards listed by
// model.safetensors.index.json ("weight_map": tensor name -> shard file). Tensors are found by
// name across shards and read as fp32, whole or one slice, so each tensor-parallel rank reads
// only its part of each weight.
// Thread-safety: after Open, all const methods may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/core/safetensors.h"

namespace spark::engine::core {

class Checkpoint {
 public:
  // Opens every shard of `dir` and validates the index against them. NotFound when the
  // directory has neither file; DataLoss for a bad index or shard (file and tensor named).
  static Result<std::unique_ptr<Checkpoint>> Open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  size_t shard_count() const { return files_.size(); }

  bool Has(const std::string& name) const;

  // NotFound naming the checkpoint directory when no shard holds `name`.
  Result<const TensorInfo*> Info(const std::string& name) const;

  // NotFound, or InvalidArgument naming the file, the tensor and both shapes when the full
  // tensor's shape is not `shape`.
  Status CheckShape(const std::string& name, const std::vector<int64_t>& shape) const;

  // The tensor (or slice) as fp32. NotFound, InvalidArgument (slice outside the shape), and,
  // when `expected_shape` is given, InvalidArgument if the slice has another shape.
  Result<std::vector<float>> Read(const std::string& name, const TensorSlice& slice = {},
                                  const std::vector<int64_t>& expected_shape = {}) const;

  // Where a tensor's slice lies in the mapped file, in the file's dtype: `rows` runs of
  // `run_bytes` bytes, `stride` bytes apart (one run for a whole tensor or a slice of rows; one
  // run per row for a column slice of a 2-d tensor). Valid while the checkpoint lives; counted
  // by the read observer like Read. NotFound; InvalidArgument as Read for the slice and
  // `expected_shape`, and for a column slice of a tensor that is not 2-d.
  // `fd` and `file_offset` locate `data` in the file, for pread.
  struct Region {
    const uint8_t* data = nullptr;
    size_t rows = 1;
    size_t run_bytes = 0;
    size_t stride = 0;
    int fd = -1;
    uint64_t file_offset = 0;
    DType dtype = DType::kF32;
  };
  Result<Region> RawRegion(const std::string& name, const TensorSlice& slice = {},
                           const std::vector<int64_t>& expected_shape = {}) const;

  // Loading progress: after each successful Read, called with the checkpoint bytes it covered
  // (the slice's share of the tensor, in the file's dtype), on the reading thread. Set it before
  // reading. Default: none.
  using ReadObserver = std::function<void(uint64_t bytes)>;
  void set_read_observer(ReadObserver observer) { observer_ = std::move(observer); }
  // Bytes of every tensor of every shard, in the files' dtypes.
  uint64_t total_tensor_bytes() const;
  // Bytes of the matrices (2-d tensors) by stored dtype: what a checkpoint's weights are held in.
  std::map<DType, uint64_t> MatrixBytesByDType() const;

 private:
  Status OpenIndex(const std::string& index_path);
  Result<const SafetensorsFile*> FileFor(const std::string& name) const;
  // InvalidArgument when `slice` of `name` in `file` does not have `expected_shape` (if given).
  Status CheckSliceShape(const SafetensorsFile& file, const std::string& name,
                         const TensorSlice& slice, const std::vector<int64_t>& expected_shape) const;
  void Observe(const TensorInfo& info, const TensorSlice& slice) const;

  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t> tensor_file_;  // tensor name -> index into files_
  ReadObserver observer_;
};

}  // namespace spark::engine::core
