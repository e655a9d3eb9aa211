#include "engine/model/deepseek_v4/tensor_source.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace spark::engine::model::dsv4 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Result<json> ReadJson(const std::string& path, const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    return DataLossError(path + ": not valid JSON (" + e.what() + ")");
  }
}

}  // namespace

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Result<std::unique_ptr<TensorSource>> TensorSource::Open(const std::string& dir) {
  std::unique_ptr<TensorSource> src(new TensorSource());
  src->dir_ = dir;
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index)) {
    std::ifstream in(index);
    std::stringstream text;
    text << in.rdbuf();
    SPARK_ASSIGN_OR_RETURN(json doc, ReadJson(index.string(), text.str()));
    if (!doc.is_object() || !doc.contains("weight_map") || !doc["weight_map"].is_object()) {
      return DataLossError(index.string() + ": weight_map: missing or not an object");
    }
    std::set<std::string> files;
    for (const auto& [name, file] : doc["weight_map"].items()) {
      if (!file.is_string())
        return DataLossError(index.string() + ": weight_map." + name + ": must name a shard file");
      files.insert(file.get<std::string>());
    }
    for (const std::string& f : files) {
      SPARK_RETURN_IF_ERROR(src->OpenFile((fs::path(dir) / f).string()));
    }
    for (const auto& [name, file] : doc["weight_map"].items()) {
      if (!src->tensors_.count(name)) {
        return DataLossError(index.string() + ": weight_map names '" + name + "' in " +
                             file.get<std::string>() + " but that shard lacks it");
      }
    }
  } else if (fs::exists(single)) {
    SPARK_RETURN_IF_ERROR(src->OpenFile(single.string()));
  } else {
    return NotFoundError(dir + ": neither model.safetensors nor model.safetensors.index.json");
  }
  return src;
}

Status TensorSource::OpenFile(const std::string& path) {
  SPARK_ASSIGN_OR_RETURN(std::unique_ptr<core::SafetensorsFile> file,
                         core::SafetensorsFile::Open(path));
  for (const auto& [name, info] : file->tensors()) {
    if (tensors_.count(name)) {
      return DataLossError(path + ": tensor '" + name + "' appears in two shards (also in " +
                           tensors_.at(name).file + ")");
    }
    SPARK_ASSIGN_OR_RETURN(std::span<const uint8_t> bytes, file->RawBytes(name));
    RawTensor t;
    t.name = name;
    t.dtype = std::string(core::DTypeName(info.dtype));
    t.element_size = core::DTypeSize(info.dtype);
    t.shape = info.shape;
    t.bytes = bytes;
    t.file = path;
    tensors_.emplace(name, std::move(t));
  }
  files_.push_back(std::move(file));
  return Status::Ok();
}

uint64_t TensorSource::total_bytes() const {
  uint64_t total = 0;
  for (const auto& [name, t] : tensors_) total += t.bytes.size();
  return total;
}

const RawTensor* TensorSource::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace spark::engine::model::dsv4
