// YAML adapter on yaml-cpp that reports every problem as "file:line:column: key: message".
//
// yaml-cpp throws; this adapter catches at the boundary and turns everything into Status. A
// YamlReader reads one document into plain structs through YamlMap, which:
//   - reports wrong types and missing required keys at the right line and column;
//   - reports unknown keys with a did-you-mean suggestion (RejectUnknown);
//   - remembers where each key path was read, so errors from a struct's Validate() (which only
//     knows key paths) can be placed at the right line too (Resolve).
// Errors are collected, not thrown at the first one: a user sees every mistake in one run.
// Thread-safety: none; one reader per thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/field_errors.h"
#include "base/status.h"

namespace spark {

struct SourceLocation {
  int line = 0;    // 1-based; 0 when unknown
  int column = 0;  // 1-based
};

// One problem in a document, for reports that list them (`profile check --json`).
struct YamlProblem {
  std::string file;
  SourceLocation location;
  std::string key;  // dotted key path; "" for the whole document
  std::string message;

  // "file:line:column: key: message".
  std::string ToString() const;
};

class YamlReader {
 public:
  // Reads and parses a file. NotFound / PermissionDenied for unreadable files; InvalidArgument
  // "file:line:column: syntax error ..." for malformed YAML.
  static Result<YamlReader> FromFile(const std::string& path, YamlProblem* syntax = nullptr);
  // Parses text; `file` is the name used in messages.
  // `syntax`, when given, receives the syntax error as a problem too.
  static Result<YamlReader> FromString(const std::string& text, const std::string& file,
                                       YamlProblem* syntax = nullptr);

  const YAML::Node& root() const { return root_; }
  const std::string& file() const { return file_; }

  // Records where a key path was read (called by YamlMap).
  void Remember(const std::string& path, const YAML::Mark& mark);
  // The location of the longest recorded prefix of `path`.
  SourceLocation Locate(const std::string& path) const;

  void AddError(const std::string& path, const std::string& message);
  void AddErrorAt(const YAML::Mark& mark, const std::string& path, const std::string& message);
  // Adds errors from a Validate() pass, placed by Locate().
  void AddAll(const FieldErrors& errors);

  const std::vector<std::string>& errors() const { return errors_; }
  // The same errors, structured, in the order they were added.
  const std::vector<YamlProblem>& problems() const { return problems_; }
  bool ok() const { return errors_.empty(); }
  // InvalidArgument listing every error (one per line), or OK.
  Status ToStatus() const;

 private:
  YamlReader(YAML::Node root, std::string file) : root_(std::move(root)), file_(std::move(file)) {}
  void Add(SourceLocation loc, const std::string& path, const std::string& message);

  YAML::Node root_;
  std::string file_;
  std::map<std::string, SourceLocation> locations_;
  std::vector<std::string> errors_;
  std::vector<YamlProblem> problems_;
};

// One YAML mapping being read into a struct. Keys not read by the time RejectUnknown() runs are
// errors. Getters return true when a value was stored.
class YamlMap {
 public:
  // `node` must be a mapping (otherwise an error is recorded and every getter returns false).
  YamlMap(YamlReader* reader, const YAML::Node& node, std::string path);

  bool valid() const { return valid_; }
  bool Has(const std::string& key) const;
  std::string PathOf(const std::string& key) const;

  template <typename T>
  bool Required(const std::string& key, T* out) {
    if (!Has(key)) {
      reader_->AddErrorAt(node_.Mark(), PathOf(key), "missing required key");
      seen_.insert(key);
      return false;
    }
    return Optional(key, out);
  }

  bool Optional(const std::string& key, std::string* out);
  bool Optional(const std::string& key, bool* out);
  bool Optional(const std::string& key, int64_t* out);
  bool Optional(const std::string& key, int* out);
  bool Optional(const std::string& key, double* out);
  bool Optional(const std::string& key, std::vector<std::string>* out);
  bool Optional(const std::string& key, std::map<std::string, std::string>* out);

  // The raw child node (marked as read); an undefined node when absent.
  YAML::Node Child(const std::string& key);
  // A child that must be a mapping / sequence; errors (and returns an undefined node) otherwise.
  YAML::Node ChildMap(const std::string& key, bool required);
  YAML::Node ChildSeq(const std::string& key, bool required);

  // Records "unknown key 'x' (did you mean 'y'?)" for every key that was never read.
  void RejectUnknown(const std::vector<std::string>& extra_known = {});

 private:
  const YAML::Node* Scalar(const std::string& key, const char* expected);

  YamlReader* reader_;
  YAML::Node node_;
  std::string path_;
  bool valid_ = false;
  std::set<std::string> seen_;
  std::vector<std::string> known_;
  YAML::Node scratch_;
};

// "mapping", "sequence", "scalar", "null".
std::string YamlKindName(const YAML::Node& node);

}  // namespace spark
