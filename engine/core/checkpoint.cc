#include "engine/core/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace spark::engine::core {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

Result<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& dir) {
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir_ = dir;
  namespace fs = std::filesystem;
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (fs::exists(index)) {
    SPARK_RETURN_IF_ERROR(ckpt->OpenIndex(index.string()));
    return ckpt;
  }
  if (!fs::exists(single)) {
    return NotFoundError(dir +
                         ": neither model.safetensors nor model.safetensors.index.json; "
                         "point --model at a Hugging Face checkpoint directory");
  }
  SPARK_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(single.string()));
  for (const auto& [name, info] : file->tensors()) ckpt->tensor_file_[name] = 0;
  ckpt->files_.push_back(std::move(file));
  return ckpt;
}

Status Checkpoint::OpenIndex(const std::string& index_path) {
  std::ifstream in(index_path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    return DataLossError(index_path + ": not valid JSON (" + e.what() + ")");
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    return DataLossError(index_path + ": lacks the object 'weight_map'");
  }
  std::map<std::string, size_t> file_ids;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string()) {
      return DataLossError(index_path + ": weight_map['" + name + "'] is not a file name");
    }
    const std::string file = shard.get<std::string>();
    if (file.find('/') != std::string::npos) {
      return DataLossError(index_path + ": weight_map['" + name + "'] = '" + file +
                           "' must be a file name inside the checkpoint directory");
    }
    auto [it, inserted] = file_ids.emplace(file, files_.size());
    if (inserted) {
      SPARK_ASSIGN_OR_RETURN(auto opened, SafetensorsFile::Open(dir_ + "/" + file));
      files_.push_back(std::move(opened));
    }
    if (files_[it->second]->Find(name) == nullptr) {
      return DataLossError(index_path + ": weight_map says tensor '" + name + "' is in " + file +
                           " but that shard has no such tensor; re-download the checkpoint");
    }
    tensor_file_[name] = it->second;
  }
  return Status::Ok();
}

bool Checkpoint::Has(const std::string& name) const { return tensor_file_.count(name) > 0; }

Result<const SafetensorsFile*> Checkpoint::FileFor(const std::string& name) const {
  auto it = tensor_file_.find(name);
  if (it == tensor_file_.end()) {
    return NotFoundError(dir_ + ": checkpoint has no tensor '" + name +
                         "' (is config.json from another model?)");
  }
  return files_[it->second].get();
}

Result<const TensorInfo*> Checkpoint::Info(const std::string& name) const {
  SPARK_ASSIGN_OR_RETURN(const SafetensorsFile* file, FileFor(name));
  return file->Find(name);
}

Status Checkpoint::CheckShape(const std::string& name, const std::vector<int64_t>& shape) const {
  SPARK_ASSIGN_OR_RETURN(const SafetensorsFile* file, FileFor(name));
  const TensorInfo* info = file->Find(name);
  if (info->shape == shape) return Status::Ok();
  return InvalidArgumentError(file->path() + ": tensor '" + name + "' has shape " +
                              ShapeString(info->shape) + "; config.json implies " +
                              ShapeString(shape) + " (config.json and weights disagree)");
}

Status Checkpoint::CheckSliceShape(const SafetensorsFile& file, const std::string& name,
                                   const TensorSlice& slice,
                                   const std::vector<int64_t>& expected_shape) const {
  if (expected_shape.empty()) return Status::Ok();
  SPARK_ASSIGN_OR_RETURN(std::vector<int64_t> shape, file.SliceShape(*file.Find(name), slice));
  if (shape == expected_shape) return Status::Ok();
  return InvalidArgumentError(file.path() + ": tensor '" + name + "' has shape " +
                              ShapeString(file.Find(name)->shape) + "; config.json implies " +
                              ShapeString(expected_shape) +
                              (slice.length >= 0 ? " for this rank's slice" : ""));
}

void Checkpoint::Observe(const TensorInfo& info, const TensorSlice& slice) const {
  if (!observer_) return;
  uint64_t bytes = info.end - info.begin;
  if (slice.length >= 0 && slice.dim < static_cast<int>(info.shape.size()) &&
      info.shape[slice.dim] > 0) {
    bytes = bytes / static_cast<uint64_t>(info.shape[slice.dim]) *
            static_cast<uint64_t>(slice.length);
  }
  observer_(bytes);
}

Result<std::vector<float>> Checkpoint::Read(const std::string& name, const TensorSlice& slice,
                                            const std::vector<int64_t>& expected_shape) const {
  SPARK_ASSIGN_OR_RETURN(const SafetensorsFile* file, FileFor(name));
  SPARK_RETURN_IF_ERROR(CheckSliceShape(*file, name, slice, expected_shape));
  Result<std::vector<float>> data = file->ReadFloat(name, slice);
  if (data.ok()) Observe(*file->Find(name), slice);
  return data;
}

Result<Checkpoint::Region> Checkpoint::RawRegion(const std::string& name, const TensorSlice& slice,
                                                 const std::vector<int64_t>& expected_shape) const {
  SPARK_ASSIGN_OR_RETURN(const SafetensorsFile* file, FileFor(name));
  const TensorInfo& info = *file->Find(name);
  SPARK_RETURN_IF_ERROR(file->SliceShape(info, slice).status());
  SPARK_RETURN_IF_ERROR(CheckSliceShape(*file, name, slice, expected_shape));
  SPARK_ASSIGN_OR_RETURN(std::span<const uint8_t> bytes, file->RawBytes(name));
  const size_t elem = DTypeSize(info.dtype);
  Region r{bytes.data(), 1, bytes.size(), bytes.size()};
  if (slice.length < 0) {
    // the whole tensor
  } else if (slice.dim == 0) {
    size_t row = elem;
    for (size_t d = 1; d < info.shape.size(); ++d) row *= static_cast<size_t>(info.shape[d]);
    r.data += static_cast<size_t>(slice.start) * row;
    r.run_bytes = r.stride = static_cast<size_t>(slice.length) * row;
  } else if (slice.dim == 1 && info.shape.size() == 2) {
    r.rows = static_cast<size_t>(info.shape[0]);
    r.stride = static_cast<size_t>(info.shape[1]) * elem;
    r.data += static_cast<size_t>(slice.start) * elem;
    r.run_bytes = static_cast<size_t>(slice.length) * elem;
  } else {
    return InvalidArgumentError(file->path() + ": tensor '" + name +
                                "': raw slices are of rows, or of columns of a matrix");
  }
  r.fd = file->fd();
  r.file_offset = file->FileOffset(r.data);
  r.dtype = info.dtype;
  Observe(info, slice);
  return r;
}

std::map<DType, uint64_t> Checkpoint::MatrixBytesByDType() const {
  std::map<DType, uint64_t> bytes;
  for (const auto& [name, file] : tensor_file_) {
    const TensorInfo* info = files_[file]->Find(name);
    if (info->shape.size() == 2) bytes[info->dtype] += info->end - info->begin;
  }
  return bytes;
}

uint64_t Checkpoint::total_tensor_bytes() const {
  uint64_t total = 0;
  for (const auto& [name, file] : tensor_file_) {
    const TensorInfo* info = files_[file]->Find(name);
    total += info->end - info->begin;
  }
  return total;
}

}  // namespace spark::engine::core
