#include "sparkctl/weights/hub_listing.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>

#include "base/strings.h"

namespace spark::weights {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool Contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// The `hf` CLI colours its messages; errors quote its last lines without the escapes.
std::string StripAnsi(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      i += 2;
      while (i < text.size() && !std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
      continue;
    }
    out += text[i];
  }
  return out;
}

std::string LastLines(const std::string& text, size_t count) {
  std::vector<std::string> lines;
  for (const std::string& line : Split(StripAnsi(text), '\n', /*skip_empty=*/true)) {
    std::string t(Trim(line));
    // Progress bars redraw with '\r'; keep what the last redraw says.
    size_t cr = t.rfind('\r');
    if (cr != std::string::npos) t = std::string(Trim(t.substr(cr + 1)));
    if (!t.empty()) lines.push_back(t);
  }
  // With HF_DEBUG=1 the CLI prints a traceback: its "...Error: ..." lines say what happened.
  std::vector<std::string> errors;
  for (const auto& l : lines) {
    if (l.find("Error") != std::string::npos && l.rfind("File ", 0) != 0 &&
        l.rfind("raise ", 0) != 0 && l.rfind("Traceback", 0) != 0) {
      errors.push_back(l);
    }
  }
  if (!errors.empty()) lines = errors;
  if (lines.size() > count) lines.erase(lines.begin(), lines.end() - count);
  return Join(lines, " | ");
}

}  // namespace

uint64_t HubListing::TotalBytes() const {
  uint64_t total = 0;
  for (const auto& f : files) total += f.size;
  return total;
}

Result<HubListing> ParseHubListing(const std::string& repository, const std::string& revision,
                                   const std::string& info_json, const std::string& tree_json,
                                   const std::string& source) {
  HubListing out{.repository = repository, .revision = revision};
  try {
    auto info = nlohmann::json::parse(info_json);
    if (!info.is_object() || !info.contains("sha") || !info["sha"].is_string()) {
      return InvalidArgumentError(source + ": the Hub's model info for " + repository +
                                  " has no commit (\"sha\"): " + info_json.substr(0, 200));
    }
    out.commit = Lower(info["sha"].get<std::string>());
    auto tree = nlohmann::json::parse(tree_json);
    if (!tree.is_array()) {
      return InvalidArgumentError(source + ": the Hub's file list for " + repository +
                                  " is not a JSON array: " + tree_json.substr(0, 200));
    }
    for (const auto& e : tree) {
      if (!e.is_object() || !e.contains("size")) continue;  // folders have no size
      HubFile f{.path = e.at("path").get<std::string>(), .size = e.at("size").get<uint64_t>()};
      if (e.contains("lfs") && e["lfs"].is_object()) {
        f.lfs_sha256 = Lower(e["lfs"].value("sha256", std::string()));
      }
      out.files.push_back(std::move(f));
    }
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(source + ": cannot read what `hf` printed for " + repository +
                                ": " + e.what());
  }
  std::sort(out.files.begin(), out.files.end(),
            [](const HubFile& a, const HubFile& b) { return a.path < b.path; });
  const std::string pin = Lower(revision);
  if (out.commit.rfind(pin, 0) != 0) {
    return FailedPreconditionError(
        "revision mismatch: " + repository + " revision " + revision + " resolves to commit " +
        out.commit +
        " on the Hub, which is not the pinned commit; pin the full commit hash in "
        "model.revision");
  }
  return out;
}

Status HubCommandError(const std::string& node, int exit_code, const std::string& output,
                       const std::string& repository, const std::string& revision,
                       const std::string& profile_file) {
  const std::string text = StripAnsi(output);
  const std::string what = repository + " at revision " + revision;
  const std::string said = LastLines(output, 3);
  if (exit_code == 127 || Contains(text, "hf: command not found") ||
      Contains(text, "hf: not found")) {
    return FailedPreconditionError(
        node +
        ": the Hugging Face CLI `hf` is not installed (or not on the PATH of SSH "
        "commands); install it there: " +
        std::string(kHfInstallCommand));
  }
  if (Contains(text, "No such command")) {
    return FailedPreconditionError(node + ": this `hf` is too old for `weights fetch` (" + said +
                                   "); upgrade it there: " + std::string(kHfInstallCommand));
  }
  // Before "not found": `hf models info` reports a gated repository as not found, and only the
  // traceback (HF_DEBUG=1) names the GatedRepoError behind it.
  if (Contains(text, "requires approval") || Contains(text, "GatedRepoError") ||
      Contains(text, "Cannot access gated repo")) {
    return PermissionDeniedError(
        node + ": " + repository +
        " is a gated repository and this token may not read it (HTTP "
        "401/403): accept its terms on the Hub's page for " +
        repository +
        " with your account, "
        "then pass a token that has access: export HF_TOKEN=hf_... before sparkctl (it is "
        "handed to the node), or `hf auth login` on " +
        node + " (hf said: " + said + ")");
  }
  if (Contains(text, "Revision not found") || Contains(text, "RevisionNotFound") ||
      (Contains(text, "Revision '") && Contains(text, "not found"))) {
    return NotFoundError(node + ": revision " + revision + " does not exist in " + repository +
                         " on the Hub; fix model.revision in " + profile_file +
                         " (a commit hash of " + repository + ") (hf said: " + said + ")");
  }
  if (Contains(text, "not found") || Contains(text, "RepoNotFound") ||
      Contains(text, "Repository Not Found")) {
    return NotFoundError(node + ": repository " + repository +
                         " was not found on the Hub "
                         "(or it is private and no token with access was given); fix "
                         "model.repository in " +
                         profile_file +
                         ", or export HF_TOKEN=hf_... "
                         "for a private repository (hf said: " +
                         said + ")");
  }
  return UnavailableError(node + ": hf failed for " + what + " (exit status " +
                          std::to_string(exit_code) + "): " + said);
}

Status CheckManifestAgainstHub(const Manifest& manifest, const HubListing& hub,
                               const std::string& manifest_source) {
  std::vector<std::string> problems;
  if (!manifest.repository.empty() && manifest.repository != hub.repository) {
    problems.push_back("it is for repository " + manifest.repository + ", not " + hub.repository);
  }
  const std::string rev = Lower(manifest.revision);
  if (!rev.empty() && (rev.size() < 7 || hub.commit.rfind(rev, 0) != 0)) {
    problems.push_back("revision mismatch: it records revision " + manifest.revision +
                       " but the profile pins " + hub.revision + " (commit " + hub.commit + ")");
  }
  std::map<std::string, const HubFile*> on_hub;
  for (const auto& f : hub.files) on_hub[f.path] = &f;
  for (const auto& e : manifest.files) {
    auto it = on_hub.find(e.path);
    if (it == on_hub.end()) {
      problems.push_back(e.path + ": not in the Hub's revision");
      continue;
    }
    const HubFile& f = *it->second;
    if (e.size && *e.size != f.size) {
      problems.push_back(e.path + ": size " + std::to_string(*e.size) + " but the Hub has " +
                         std::to_string(f.size));
    }
    if (!f.lfs_sha256.empty() && f.lfs_sha256 != e.sha256) {
      problems.push_back(e.path + ": SHA-256 " + e.sha256 + " but the Hub's LFS SHA-256 is " +
                         f.lfs_sha256);
    }
    on_hub.erase(it);
  }
  for (const auto& [path, f] : on_hub) problems.push_back(path + ": on the Hub but not listed");
  if (problems.empty()) return Status::Ok();
  size_t shown = std::min<size_t>(problems.size(), 10);
  std::string text =
      Join(std::vector<std::string>(problems.begin(), problems.begin() + shown), "\n  ");
  if (shown < problems.size()) {
    text += "\n  ... and " + std::to_string(problems.size() - shown) + " more";
  }
  return FailedPreconditionError(manifest_source + " does not describe " + hub.repository +
                                 " at commit " + hub.commit + ":\n  " + text);
}

}  // namespace spark::weights
