#include "engine/core/config_reader.h"

namespace spark::engine::core {

using nlohmann::json;

bool ConfigReader::Present(const char* key, bool required) {
  if (doc_.contains(key) && !doc_[key].is_null()) return true;
  if (required) errors_->Add(key, "missing (a Hugging Face config.json always has it)");
  return false;
}

void ConfigReader::Int(const char* key, int* out, bool required) {
  if (!Present(key, required)) return;
  if (!doc_[key].is_number_integer()) return Bad(key, "must be an integer");
  *out = doc_[key].get<int>();
}

void ConfigReader::Float(const char* key, float* out, bool required) {
  if (!Present(key, required)) return;
  if (!doc_[key].is_number()) return Bad(key, "must be a number");
  *out = doc_[key].get<float>();
}

void ConfigReader::Double(const char* key, double* out, bool required) {
  if (!Present(key, required)) return;
  if (!doc_[key].is_number()) return Bad(key, "must be a number");
  *out = doc_[key].get<double>();
}

void ConfigReader::Bool(const char* key, bool* out) {
  if (!Present(key, false)) return;
  if (!doc_[key].is_boolean()) return Bad(key, "must be true or false");
  *out = doc_[key].get<bool>();
}

void ConfigReader::String(const char* key, std::string* out) {
  if (!Present(key, false)) return;
  if (!doc_[key].is_string()) return Bad(key, "must be a string");
  *out = doc_[key].get<std::string>();
}

void ConfigReader::IntList(const char* key, std::vector<int>* out) {
  if (!Present(key, false)) return;
  const json& v = doc_[key];
  if (v.is_number_integer()) return out->push_back(v.get<int>());
  if (!v.is_array()) return Bad(key, "must be an integer or a list of integers");
  for (const json& e : v) {
    if (!e.is_number_integer()) return Bad(key, "must hold only integers");
    out->push_back(e.get<int>());
  }
}

void ConfigReader::Refuse(const char* key, const json& allowed, const std::string& why) {
  if (!doc_.contains(key) || doc_[key].is_null() || doc_[key] == allowed) return;
  Bad(key, "= " + doc_[key].dump() + " is not supported (" + why + ")");
}

std::string StringOr(const json& obj, const char* key, const std::string& fallback) {
  return obj.contains(key) && obj[key].is_string() ? obj[key].get<std::string>() : fallback;
}

}  // namespace spark::engine::core
