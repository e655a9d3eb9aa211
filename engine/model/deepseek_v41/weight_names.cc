#include "engine/model/deepseek_v41/weight_names.h"

#include <utility>

namespace spark::engine::model::dsv41 {
namespace {

// Released name -> transformers' name where the two differ beyond the "model." prefix.
constexpr std::pair<const char*, const char*> kRenamed[] = {
    {"head.weight", "lm_head.weight"},
};

constexpr const char* kIgnoredPrefixes[] = {"mtp.", "vision.", "aligner."};
constexpr const char* kIgnoredNames[] = {"image_start", "image_end", "image_newline"};

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

std::vector<std::string> CandidateNames(const std::string& canonical) {
  std::vector<std::string> names = {canonical, "model." + canonical};
  for (const auto& [released, theirs] : kRenamed) {
    if (canonical == released) names.push_back(theirs);
  }
  return names;
}

bool IsIgnoredTensor(const std::string& name) {
  const std::string bare = StartsWith(name, "model.") ? name.substr(6) : name;
  for (const char* p : kIgnoredPrefixes) {
    if (StartsWith(bare, p)) return true;
  }
  for (const char* n : kIgnoredNames) {
    if (bare == n) return true;
  }
  return false;
}

dsv4::TensorNaming V41Naming() { return {CandidateNames, IsIgnoredTensor}; }

}  // namespace spark::engine::model::dsv41
