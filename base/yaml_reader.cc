#include "base/yaml_reader.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

#include "base/strings.h"

namespace spark {
namespace {

SourceLocation FromMark(const YAML::Mark& mark) {
  if (mark.line < 0 || mark.column < 0) return {};
  return {mark.line + 1, mark.column + 1};
}

}  // namespace

std::string YamlKindName(const YAML::Node& node) {
  if (!node.IsDefined()) return "nothing";
  switch (node.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Scalar: return "'" + node.Scalar() + "'";
    case YAML::NodeType::Null: return "an empty value";
    default: return "nothing";
  }
}

std::string YamlProblem::ToString() const {
  std::string out = file + ":" + std::to_string(location.line) + ":" +
                    std::to_string(location.column) + ": ";
  if (!key.empty()) out += key + ": ";
  return out + message;
}

Result<YamlReader> YamlReader::FromFile(const std::string& path, YamlProblem* syntax) {
  std::ifstream in(path);
  if (!in) return ErrnoError(errno, path);
  std::stringstream buf;
  buf << in.rdbuf();
  return FromString(buf.str(), path, syntax);
}

Result<YamlReader> YamlReader::FromString(const std::string& text, const std::string& file,
                                          YamlProblem* syntax) {
  try {
    YAML::Node root = YAML::Load(text);
    return YamlReader(root, file);
  } catch (const YAML::Exception& e) {
    const YamlProblem problem{file, FromMark(e.mark), "", "syntax error: " + e.msg};
    if (syntax != nullptr) *syntax = problem;
    return InvalidArgumentError(problem.ToString());
  }
}

void YamlReader::Remember(const std::string& path, const YAML::Mark& mark) {
  SourceLocation loc = FromMark(mark);
  if (loc.line > 0) locations_[path] = loc;
}

SourceLocation YamlReader::Locate(const std::string& path) const {
  std::string p = path;
  while (true) {
    auto it = locations_.find(p);
    if (it != locations_.end()) return it->second;
    size_t cut = p.find_last_of(".[");
    if (cut == std::string::npos || cut == 0) break;
    p = p.substr(0, cut);
  }
  auto it = locations_.find(p);
  if (it != locations_.end()) return it->second;
  return {1, 1};
}

void YamlReader::Add(SourceLocation loc, const std::string& path, const std::string& message) {
  problems_.push_back({file_, loc, path, message});
  errors_.push_back(problems_.back().ToString());
}

void YamlReader::AddError(const std::string& path, const std::string& message) {
  Add(Locate(path), path, message);
}

void YamlReader::AddErrorAt(const YAML::Mark& mark, const std::string& path,
                            const std::string& message) {
  SourceLocation loc = FromMark(mark);
  if (loc.line == 0) loc = Locate(path);
  Add(loc, path, message);
}

void YamlReader::AddAll(const FieldErrors& errors) {
  for (const auto& e : errors.errors()) AddError(e.path, e.message);
}

Status YamlReader::ToStatus() const {
  if (errors_.empty()) return Status::Ok();
  return InvalidArgumentError(Join(errors_, "\n"));
}

YamlMap::YamlMap(YamlReader* reader, const YAML::Node& node, std::string path)
    : reader_(reader), node_(node), path_(std::move(path)) {
  if (!node.IsDefined() || node.IsNull()) {
    reader_->AddErrorAt(node.IsDefined() ? node.Mark() : YAML::Mark::null_mark(), path_,
                        path_.empty() ? "the document is empty; expected a mapping of keys"
                                      : "expected a mapping of keys, found an empty value");
    return;
  }
  if (!node.IsMap()) {
    reader_->AddErrorAt(node.Mark(), path_, "expected a mapping of keys, found " + YamlKindName(node));
    return;
  }
  valid_ = true;
  std::set<std::string> keys;
  for (const auto& kv : node_) {
    if (!kv.first.IsScalar()) {
      reader_->AddErrorAt(kv.first.Mark(), path_, "keys must be plain names");
      continue;
    }
    const std::string& key = kv.first.Scalar();
    reader_->Remember(PathOf(key), kv.first.Mark());
    if (!keys.insert(key).second) {
      reader_->AddErrorAt(kv.first.Mark(), PathOf(key), "duplicate key");
    }
  }
}

bool YamlMap::Has(const std::string& key) const {
  if (!valid_) return false;
  for (const auto& kv : node_) {
    if (kv.first.IsScalar() && kv.first.Scalar() == key) return true;
  }
  return false;
}

std::string YamlMap::PathOf(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

YAML::Node YamlMap::Child(const std::string& key) {
  known_.push_back(key);
  seen_.insert(key);
  if (!valid_) return YAML::Node(YAML::NodeType::Undefined);
  for (const auto& kv : node_) {
    if (kv.first.IsScalar() && kv.first.Scalar() == key) return kv.second;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

const YAML::Node* YamlMap::Scalar(const std::string& key, const char* expected) {
  scratch_ = Child(key);
  if (!scratch_.IsDefined()) return nullptr;
  if (!scratch_.IsScalar()) {
    reader_->AddErrorAt(scratch_.Mark(), PathOf(key),
                        std::string("expected ") + expected + ", found " + YamlKindName(scratch_));
    return nullptr;
  }
  return &scratch_;
}

bool YamlMap::Optional(const std::string& key, std::string* out) {
  const YAML::Node* n = Scalar(key, "a string");
  if (!n) return false;
  *out = n->Scalar();
  return true;
}

bool YamlMap::Optional(const std::string& key, bool* out) {
  const YAML::Node* n = Scalar(key, "true or false");
  if (!n) return false;
  try {
    *out = n->as<bool>();
    return true;
  } catch (const YAML::Exception&) {
    reader_->AddErrorAt(n->Mark(), PathOf(key), "expected true or false, found '" + n->Scalar() + "'");
    return false;
  }
}

bool YamlMap::Optional(const std::string& key, int64_t* out) {
  const YAML::Node* n = Scalar(key, "an integer");
  if (!n) return false;
  std::string text = n->Scalar();
  std::string digits;
  for (char c : text) {
    if (c != '_') digits += c;  // 1_048_576 is allowed, as in YAML 1.1
  }
  auto value = ParseInt(digits);
  if (!value) {
    reader_->AddErrorAt(n->Mark(), PathOf(key), "expected an integer, found '" + text + "'");
    return false;
  }
  *out = *value;
  return true;
}

bool YamlMap::Optional(const std::string& key, int* out) {
  int64_t v = 0;
  if (!Optional(key, &v)) return false;
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    reader_->AddError(PathOf(key), "integer " + std::to_string(v) + " is out of range");
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

bool YamlMap::Optional(const std::string& key, double* out) {
  const YAML::Node* n = Scalar(key, "a number");
  if (!n) return false;
  try {
    *out = n->as<double>();
    return true;
  } catch (const YAML::Exception&) {
    reader_->AddErrorAt(n->Mark(), PathOf(key), "expected a number, found '" + n->Scalar() + "'");
    return false;
  }
}

bool YamlMap::Optional(const std::string& key, std::vector<std::string>* out) {
  YAML::Node n = Child(key);
  if (!n.IsDefined()) return false;
  if (!n.IsSequence()) {
    reader_->AddErrorAt(n.Mark(), PathOf(key), "expected a list of strings, found " + YamlKindName(n));
    return false;
  }
  out->clear();
  bool ok = true;
  for (size_t i = 0; i < n.size(); ++i) {
    std::string item_path = PathOf(key) + "[" + std::to_string(i) + "]";
    if (!n[i].IsScalar()) {
      reader_->AddErrorAt(n[i].Mark(), item_path, "expected a string, found " + YamlKindName(n[i]));
      ok = false;
      continue;
    }
    reader_->Remember(item_path, n[i].Mark());
    out->push_back(n[i].Scalar());
  }
  return ok;
}

bool YamlMap::Optional(const std::string& key, std::map<std::string, std::string>* out) {
  YAML::Node n = Child(key);
  if (!n.IsDefined()) return false;
  if (!n.IsMap()) {
    reader_->AddErrorAt(n.Mark(), PathOf(key), "expected a mapping of names to strings, found " +
                                                   YamlKindName(n));
    return false;
  }
  out->clear();
  bool ok = true;
  for (const auto& kv : n) {
    std::string name = kv.first.Scalar();
    std::string item_path = PathOf(key) + "." + name;
    reader_->Remember(item_path, kv.first.Mark());
    if (!kv.second.IsScalar()) {
      reader_->AddErrorAt(kv.second.Mark(), item_path,
                          "expected a string value, found " + YamlKindName(kv.second));
      ok = false;
      continue;
    }
    (*out)[name] = kv.second.Scalar();
  }
  return ok;
}

YAML::Node YamlMap::ChildMap(const std::string& key, bool required) {
  YAML::Node n = Child(key);
  if (!n.IsDefined()) {
    if (required && valid_) reader_->AddErrorAt(node_.Mark(), PathOf(key), "missing required section");
    return YAML::Node(YAML::NodeType::Undefined);
  }
  return n;  // YamlMap's constructor reports a non-mapping
}

YAML::Node YamlMap::ChildSeq(const std::string& key, bool required) {
  YAML::Node n = Child(key);
  if (!n.IsDefined()) {
    if (required && valid_) reader_->AddErrorAt(node_.Mark(), PathOf(key), "missing required list");
    return YAML::Node(YAML::NodeType::Undefined);
  }
  if (!n.IsSequence()) {
    reader_->AddErrorAt(n.Mark(), PathOf(key), "expected a list, found " + YamlKindName(n));
    return YAML::Node(YAML::NodeType::Undefined);
  }
  return n;
}

void YamlMap::RejectUnknown(const std::vector<std::string>& extra_known) {
  if (!valid_) return;
  std::vector<std::string> candidates = known_;
  candidates.insert(candidates.end(), extra_known.begin(), extra_known.end());
  for (const auto& kv : node_) {
    if (!kv.first.IsScalar()) continue;
    const std::string& key = kv.first.Scalar();
    if (seen_.count(key) ||
        std::find(extra_known.begin(), extra_known.end(), key) != extra_known.end()) {
      continue;
    }
    reader_->AddErrorAt(kv.first.Mark(), PathOf(key),
                        "unknown key" + DidYouMean(key, candidates));
  }
}

}  // namespace spark
