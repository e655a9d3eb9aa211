#include "sparkctl/profile/profile.h"

#include <algorithm>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>

#include "base/strings.h"
#include "netplan/ipv4.h"

namespace spark::profile {
namespace {

bool IsHex(std::string_view s) {
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool IsEnvName(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

bool IsLoopback(std::string_view bind) {
  if (bind == "localhost" || bind == "::1") return true;
  auto ip = netplan::Ipv4::Parse(bind);
  return ip && (ip->value >> 24) == 127;
}

void ValidateModel(const ModelSpec& m, FieldErrors* errors) {
  if (m.repository.empty()) {
    errors->Add("model.repository", "required (e.g. deepseek-ai/DeepSeek-V4.1-Flash)");
  } else if (m.repository.find('/') == std::string::npos) {
    errors->Add("model.repository", "'" + m.repository + "' should be owner/name");
  }
  if (m.revision.size() < 7 || m.revision.size() > 40 || !IsHex(m.revision)) {
    errors->Add("model.revision", "'" + m.revision +
                                      "' is not a pinned commit (7 to 40 hex digits); branch names "
                                      "such as 'main' move and are not accepted");
  }
  if (m.path.empty() || m.path[0] != '/') {
    errors->Add("model.path", "must be an absolute path on every node (got '" + m.path + "')");
  }
  if (m.size_gib < 0) errors->Add("model.size_gib", "must not be negative");
  if (m.resident_gib_per_node < 0) errors->Add("model.resident_gib_per_node", "must not be negative");
}

void ValidateTopology(const TopologySpec& t, FieldErrors* errors) {
  if (t.nodes < netplan::MinNodes(t.kind) || t.nodes > netplan::MaxNodes(t.kind)) {
    errors->Add("topology.nodes",
                std::to_string(t.nodes) + " nodes do not make a " +
                    std::string(netplan::TopologyName(t.kind)) + " (" +
                    std::to_string(netplan::MinNodes(t.kind)) + ".." +
                    std::to_string(netplan::MaxNodes(t.kind)) + " nodes)");
  }
  if (t.gpus_per_node < 1 || t.gpus_per_node > 8) {
    errors->Add("topology.gpus_per_node", "out of range (1..8; a DGX Spark has 1)");
  }
}

void ValidateHost(const HostSpec& h, FieldErrors* errors) {
  std::set<std::string> allowed(h.kernel_allow.begin(), h.kernel_allow.end());
  for (size_t i = 0; i < h.kernel_deny.size(); ++i) {
    const KernelDeny& d = h.kernel_deny[i];
    std::string path = "host.kernel.deny[" + std::to_string(i) + "]";
    if (d.release.empty()) errors->Add(path + ".release", "required");
    if (d.reason.empty()) errors->Add(path + ".reason", "required: say why this kernel is denied");
    if (d.fix.empty()) errors->Add(path + ".fix", "required: say what the user should do");
    if (allowed.count(d.release)) {
      errors->Add(path + ".release", d.release + " is both allowed and denied");
    }
  }
  if (h.min_cma_mib < 0) errors->Add("host.min_cma_mib", "must not be negative");
  if (h.memlock != "unlimited" && !ParseInt(h.memlock)) {
    errors->Add("host.memlock", "'" + h.memlock + "' must be 'unlimited' or a size in KiB");
  }
  if (h.min_free_memory_gib < 0) errors->Add("host.min_free_memory_gib", "must not be negative");
}

void ValidateEngine(const EngineSpec& e, const TopologySpec& t, FieldErrors* errors) {
  if (e.backend != "auto" && e.backend != "cuda" && e.backend != "cpu") {
    errors->Add("engine.backend",
                "'" + e.backend + "' is not a backend (auto, cuda, cpu)" +
                    DidYouMean(e.backend, {"auto", "cuda", "cpu"}));
  }
  if (e.weight_dtype != "auto" && e.weight_dtype != "fp32" && e.weight_dtype != "bf16" &&
      e.weight_dtype != "fp8") {
    errors->Add("engine.weight_dtype",
                "'" + e.weight_dtype + "' is not a weight dtype (auto, fp32, bf16, fp8)" +
                    DidYouMean(e.weight_dtype, {"auto", "fp32", "bf16", "fp8"}));
  }
  if (e.cuda_graphs.value_or(false) && e.backend == "cpu") {
    errors->Add("engine.cuda_graphs", "needs the cuda backend (engine.backend is cpu)");
  }
  int gpus = t.nodes * t.gpus_per_node;
  if (e.tp < 1 || gpus % e.tp != 0) {
    errors->Add("engine.tp", "tp " + std::to_string(e.tp) + " must divide the " +
                                 std::to_string(gpus) + " GPUs of the topology (" +
                                 std::to_string(t.nodes) + " nodes x " +
                                 std::to_string(t.gpus_per_node) + ")");
  }
  if (e.context_length < 16 || e.context_length > (int64_t{1} << 24)) {
    errors->Add("engine.context_length", "out of range (16..16777216)");
  }
  if (e.max_running_requests < 1 || e.max_running_requests > 4096) {
    errors->Add("engine.max_running_requests", "out of range (1..4096)");
  }
  const KvCacheSpec& kv = e.kv_cache;
  if (kv.tokens.has_value() == kv.memory_fraction.has_value()) {
    errors->Add("engine.kv_cache", "give exactly one budget: tokens or memory_fraction");
  }
  // Not compared with context_length: models with compressed attention (DeepSeek-V4) keep far
  // fewer cache entries than tokens, and field deployments run 1M context on 1,000,000 tokens.
  if (kv.tokens && *kv.tokens < 1) errors->Add("engine.kv_cache.tokens", "must be positive");
  if (kv.memory_fraction && (*kv.memory_fraction <= 0 || *kv.memory_fraction > 0.9)) {
    errors->Add("engine.kv_cache.memory_fraction",
                "must be in (0, 0.9]: unified memory wedges the host when exhausted");
  }
  if (e.chunked_prefill < 0 || e.chunked_prefill > e.context_length) {
    errors->Add("engine.chunked_prefill", "must be 0 (off) or 1..context_length");
  }
  const MemoryGuardSpec& g = e.memory_guard;
  if (g.hard_floor_gib < 0 || g.admit_floor_gib < g.hard_floor_gib ||
      g.startup_floor_gib < g.admit_floor_gib) {
    errors->Add("engine.memory_guard",
                "floors must satisfy 0 <= hard_floor_gib (" + FormatNumber(g.hard_floor_gib) +
                    ") <= admit_floor_gib (" + FormatNumber(g.admit_floor_gib) +
                    ") <= startup_floor_gib (" + FormatNumber(g.startup_floor_gib) + ")");
  }
  const SpeculativeSpec& sp = e.speculative;
  const std::vector<std::string> methods = {"none", "ngram", "mtp", "dspark"};
  if (std::find(methods.begin(), methods.end(), sp.method) == methods.end()) {
    errors->Add("engine.speculative.method", "'" + sp.method +
                                                 "' is not a method (none, ngram, dspark; mtp "
                                                 "is not implemented)" +
                                                 DidYouMean(sp.method, methods));
  } else if (sp.method == "mtp") {
    errors->Add("engine.speculative.method",
                "'mtp' is not implemented (DeepSeek-V4.1's mtp.* layers are DSpark stages); use "
                "method: dspark, ngram (prompt lookup, any model) or none");
  } else if (sp.method == "ngram" || sp.method == "dspark") {
    if (sp.num_speculative_tokens < 1 || sp.num_speculative_tokens > 16) {
      errors->Add("engine.speculative.num_speculative_tokens",
                  std::to_string(sp.num_speculative_tokens) + " is out of range: " + sp.method +
                      " needs 1..16 draft tokens a step");
    }
    const int lo = sp.prompt_lookup_min.value_or(1), hi = sp.prompt_lookup_max.value_or(4);
    if (lo < 1) {
      errors->Add("engine.speculative.prompt_lookup_min",
                  std::to_string(lo) + " must be >= 1 (tokens matched)");
    } else if (hi < lo || hi > 64) {
      errors->Add("engine.speculative.prompt_lookup_max",
                  std::to_string(hi) + " must be in prompt_lookup_min (" + std::to_string(lo) +
                      ") .. 64");
    }
  }
  if (sp.method == "none") {
    if (sp.num_speculative_tokens != 0) {
      errors->Add("engine.speculative.num_speculative_tokens",
                  "set without a method; set method: ngram or dspark, or remove it");
    }
  }
  if (sp.method != "ngram" && (sp.prompt_lookup_max || sp.prompt_lookup_min)) {
    errors->Add(sp.prompt_lookup_max ? "engine.speculative.prompt_lookup_max"
                                     : "engine.speculative.prompt_lookup_min",
                "applies to method: ngram only (method is " + sp.method + ")");
  }
  const CollectivesSpec& c = e.collectives;
  if (c.oneshot_max_bytes < 0 || c.oneshot_max_bytes > (int64_t{64} << 20)) {
    errors->Add("engine.collectives.oneshot_max_bytes", "out of range (0 = off .. 67108864)");
  } else if (c.oneshot_max_bytes > 0 && e.tp < 2) {
    errors->Add("engine.collectives.oneshot_max_bytes",
                "needs engine.tp > 1 (one rank has no collectives)");
  }
  if (c.wire != "socket" && c.wire != "rdma") {
    errors->Add("engine.collectives.wire", "'" + c.wire + "' is not a wire (socket, rdma)");
  }
}

void ValidateApi(const ApiSpec& a, FieldErrors* errors) {
  if (a.port < 1 || a.port > 65535) errors->Add("api.port", "out of range (1..65535)");
  if (a.bind.empty()) errors->Add("api.bind", "must not be empty");
  if (!IsLoopback(a.bind) && a.key_file.empty()) {
    errors->Add("api.key_file", "required when api.bind (" + a.bind +
                                    ") is not a loopback address: the endpoint must not be open");
  }
  if (a.tls.cert.empty() != a.tls.key.empty()) {
    errors->Add(a.tls.cert.empty() ? "api.tls.cert" : "api.tls.key",
                "api.tls needs both cert and key (make them with `sparkctl tls selfsigned`)");
  }
  if (!a.tls.ca.empty() && a.tls.cert.empty()) {
    errors->Add("api.tls.ca", "needs api.tls.cert and api.tls.key");
  }
  for (auto [name, value] : {std::pair{"max_connections", a.limits.max_connections},
                             {"max_connections_per_peer", a.limits.max_connections_per_peer},
                             {"max_requests_per_peer", a.limits.max_requests_per_peer}}) {
    if (value < 1) errors->Add(std::string("api.limits.") + name, "must be >= 1");
  }
  if (a.default_max_tokens < 0) errors->Add("api.default_max_tokens", "must be >= 0 (0: unset)");
  if (a.max_tokens_limit < 0) errors->Add("api.max_tokens_limit", "must be >= 0 (0: unset)");
  if (a.max_tokens_limit > 0 && a.default_max_tokens > a.max_tokens_limit) {
    errors->Add("api.default_max_tokens", "(" + std::to_string(a.default_max_tokens) +
                                              ") is above api.max_tokens_limit (" +
                                              std::to_string(a.max_tokens_limit) + ")");
  }
}

void ValidateQuality(const QualitySpec& q, const EngineSpec& e, FieldErrors* errors) {
  if (q.text.empty()) errors->Add("quality.text", "required: the text file the reference scores");
  if (!(q.perplexity > 0) || !std::isfinite(q.perplexity)) {
    errors->Add("quality.perplexity", "required: the reference perplexity, a number > 0");
  }
  if (!(q.tolerance > 0 && q.tolerance <= 1)) {
    errors->Add("quality.tolerance", "out of range (0..1, a fraction of the reference)");
  }
  if (q.context < 2 || q.context > e.context_length) {
    errors->Add("quality.context", "out of range (2..engine.context_length " +
                                       std::to_string(e.context_length) + ")");
  }
}

}  // namespace

std::string_view KvCacheDtypeName(KvCacheDtype dtype) {
  switch (dtype) {
    case KvCacheDtype::kAuto: return "auto";
    case KvCacheDtype::kFp8: return "fp8";
    case KvCacheDtype::kBf16: return "bf16";
    case KvCacheDtype::kFp16: return "fp16";
    case KvCacheDtype::kFp32: return "fp32";
  }
  return "?";
}

std::optional<KvCacheDtype> ParseKvCacheDtype(std::string_view name) {
  for (auto d : {KvCacheDtype::kAuto, KvCacheDtype::kFp8, KvCacheDtype::kBf16,
                 KvCacheDtype::kFp16, KvCacheDtype::kFp32}) {
    if (KvCacheDtypeName(d) == name) return d;
  }
  return std::nullopt;
}

void ApplyDefaults(Profile* p) {
  if (p->model.served_name.empty() && !p->model.repository.empty()) {
    size_t slash = p->model.repository.rfind('/');
    p->model.served_name =
        slash == std::string::npos ? p->model.repository : p->model.repository.substr(slash + 1);
  }
}

std::string ResolvedQualityText(const Profile& profile) {
  if (!profile.quality || profile.quality->text.empty()) return "";
  std::filesystem::path text(profile.quality->text);
  if (text.is_absolute() || profile.source_file.empty()) return text.string();
  return (std::filesystem::path(profile.source_file).parent_path() / text).lexically_normal();
}

void Validate(const Profile& p, FieldErrors* errors) {
  if (p.schema != kProfileSchema) {
    errors->Add("schema", "unsupported schema '" + p.schema + "'; this sparkctl reads " +
                              std::string(kProfileSchema));
  }
  if (p.name.empty()) errors->Add("name", "required");
  ValidateModel(p.model, errors);
  ValidateTopology(p.topology, errors);
  ValidateHost(p.host, errors);
  ValidateEngine(p.engine, p.topology, errors);
  ValidateApi(p.api, errors);
  if (p.quality) ValidateQuality(*p.quality, p.engine, errors);
  for (const auto& entry : p.env) {
    if (!IsEnvName(entry.first)) {
      errors->Add("env." + entry.first, "not a valid environment variable name");
    }
  }
}

}  // namespace spark::profile
