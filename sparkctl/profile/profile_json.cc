#include "sparkctl/profile/profile_json.h"

#include "sparkctl/profile/profile_yaml.h"

namespace spark::profile {
namespace {

nlohmann::ordered_json HostJson(const HostSpec& h) {
  nlohmann::ordered_json deny = nlohmann::ordered_json::array();
  for (const auto& d : h.kernel_deny) {
    deny.push_back({{"release", d.release}, {"reason", d.reason}, {"fix", d.fix}});
  }
  return {
      {"kernel", {{"allow", h.kernel_allow}, {"deny", deny}, {"cmdline", h.kernel_cmdline}}},
      {"min_cma_mib", h.min_cma_mib},
      {"memlock", h.memlock},
      {"min_free_memory_gib", h.min_free_memory_gib},
  };
}

nlohmann::ordered_json EngineJson(const EngineSpec& e) {
  nlohmann::ordered_json kv = {{"dtype", KvCacheDtypeName(e.kv_cache.dtype)}};
  kv["tokens"] = e.kv_cache.tokens ? nlohmann::ordered_json(*e.kv_cache.tokens) : nullptr;
  kv["memory_fraction"] =
      e.kv_cache.memory_fraction ? nlohmann::ordered_json(*e.kv_cache.memory_fraction) : nullptr;
  return {
      {"backend", e.backend},
      {"weight_dtype", e.weight_dtype},
      {"cuda_graphs", e.cuda_graphs ? nlohmann::ordered_json(*e.cuda_graphs)
                                    : nlohmann::ordered_json("auto")},
      {"tp", e.tp},
      {"context_length", e.context_length},
      {"max_running_requests", e.max_running_requests},
      {"kv_cache", kv},
      {"chunked_prefill", e.chunked_prefill},
      {"prefix_caching", e.prefix_caching},
      {"speculative",
       {{"method", e.speculative.method},
        {"num_speculative_tokens", e.speculative.num_speculative_tokens},
        {"prompt_lookup_max", e.speculative.prompt_lookup_max.value_or(4)},
        {"prompt_lookup_min", e.speculative.prompt_lookup_min.value_or(1)}}},
      {"reasoning_parser", e.reasoning_parser},
      {"tool_parser", e.tool_parser},
      {"memory_guard",
       {{"startup_floor_gib", e.memory_guard.startup_floor_gib},
        {"admit_floor_gib", e.memory_guard.admit_floor_gib},
        {"hard_floor_gib", e.memory_guard.hard_floor_gib}}},
      {"collectives",
       {{"oneshot_max_bytes", e.collectives.oneshot_max_bytes}, {"wire", e.collectives.wire}}},
  };
}

}  // namespace

nlohmann::ordered_json ToJson(const Profile& p) {
  return {
      {"schema", p.schema},
      {"name", p.name},
      {"description", p.description},
      {"source_file", p.source_file},
      {"model",
       {{"repository", p.model.repository},
        {"revision", p.model.revision},
        {"path", p.model.path},
        {"manifest", p.model.manifest},
        {"manifest_resolved", ResolvedManifestPath(p)},
        {"served_name", p.model.served_name},
        {"size_gib", p.model.size_gib},
        {"resident_gib_per_node", p.model.resident_gib_per_node}}},
      {"topology",
       {{"kind", netplan::TopologyName(p.topology.kind)},
        {"nodes", p.topology.nodes},
        {"gpus_per_node", p.topology.gpus_per_node}}},
      {"host", HostJson(p.host)},
      {"engine", EngineJson(p.engine)},
      {"api",
       {{"port", p.api.port},
        {"bind", p.api.bind},
        {"key_file", p.api.key_file},
        {"default_max_tokens", p.api.default_max_tokens},
        {"max_tokens_limit", p.api.max_tokens_limit},
        {"tls", {{"cert", p.api.tls.cert}, {"key", p.api.tls.key}, {"ca", p.api.tls.ca}}},
        {"limits",
         {{"max_connections", p.api.limits.max_connections},
          {"max_connections_per_peer", p.api.limits.max_connections_per_peer},
          {"max_requests_per_peer", p.api.limits.max_requests_per_peer}}}}},
      {"quality", p.quality ? nlohmann::ordered_json{{"text", p.quality->text},
                                                     {"perplexity", p.quality->perplexity},
                                                     {"tolerance", p.quality->tolerance},
                                                     {"context", p.quality->context}}
                            : nlohmann::ordered_json(nullptr)},
      {"env", p.env},
  };
}

}  // namespace spark::profile
