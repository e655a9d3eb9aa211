// FieldErrors: problems found in a configuration, each tied to the dotted path of its key
// ("engine.tp", "nodes[2].ports[0].peer.node").
//
// Validate() functions of plain config structs report here without knowing where the values came
// from; the YAML adapter (yaml_reader.h) turns paths into "file:line:column: key: message", and
// CLI flag overrides turn them into "--flag: message".
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace spark {

struct FieldError {
  std::string path;     // dotted key path; "" for the whole document
  std::string message;  // what is wrong and, where known, what would be right
};

class FieldErrors {
 public:
  void Add(std::string path, std::string message) {
    errors_.push_back({std::move(path), std::move(message)});
  }
  bool empty() const { return errors_.empty(); }
  size_t size() const { return errors_.size(); }
  const std::vector<FieldError>& errors() const { return errors_; }

  // InvalidArgument with one "path: message" per line, or OK when empty.
  Status ToStatus(const std::string& what) const;

 private:
  std::vector<FieldError> errors_;
};

}  // namespace spark
