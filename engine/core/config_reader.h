// ConfigReader: typed reads of a Hugging Face config.json object that record each problem in a
// FieldErrors (key and message) instead of throwing, so a family's parser reports every bad key
// at once. Model families' config parsers (engine/model/<family>/) build on it.
// Thread-safety: one reader per parse.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/field_errors.h"

namespace spark::engine::core {

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& doc, FieldErrors* errors) : doc_(doc), errors_(errors) {}

  // Each leaves *out untouched when the key is absent or null (an error when required).
  void Int(const char* key, int* out, bool required = true);
  void Float(const char* key, float* out, bool required = true);
  void Double(const char* key, double* out, bool required = true);
  void Bool(const char* key, bool* out);
  void String(const char* key, std::string* out);
  // An integer or a list of integers, appended to *out.
  void IntList(const char* key, std::vector<int>* out);
  // The key may be absent or null, or hold exactly `allowed`; anything else is unsupported.
  void Refuse(const char* key, const nlohmann::json& allowed, const std::string& why);
  void Bad(const std::string& key, const std::string& message) { errors_->Add(key, message); }

  const nlohmann::json& doc() const { return doc_; }

 private:
  bool Present(const char* key, bool required);
  const nlohmann::json& doc_;
  FieldErrors* errors_;
};

// obj[key] when it is a string, else `fallback`.
std::string StringOr(const nlohmann::json& obj, const char* key, const std::string& fallback);

}  // namespace spark::engine::core
