#include "base/strings.h"
#include "sparkctl/host/facts.h"

namespace spark::host {

std::optional<int> RdmaDeviceFacts::RoceV2Ipv4Index() const {
  for (const GidEntry& g : gids) {
    if (g.type != "RoCE v2") continue;
    // IPv4-mapped IPv6: 0000:...:0000:ffff:xxxx:xxxx.
    if (StartsWith(g.gid, "0000:0000:0000:0000:0000:ffff:")) return g.index;
  }
  return std::nullopt;
}

const NetdevFacts* NodeFacts::FindNetdev(const std::string& name) const {
  for (const auto& n : netdevs) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

const RdmaDeviceFacts* NodeFacts::FindRdma(const std::string& name) const {
  for (const auto& r : rdma) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

nlohmann::json ToJson(const NodeFacts& f) {
  nlohmann::json rdma = nlohmann::json::array();
  for (const auto& r : f.rdma) {
    nlohmann::json gids = nlohmann::json::array();
    for (const auto& g : r.gids) {
      gids.push_back({{"index", g.index}, {"gid", g.gid}, {"type", g.type}, {"netdev", g.netdev}});
    }
    rdma.push_back({{"name", r.name},
                    {"netdev", r.netdev},
                    {"state", r.state},
                    {"active_mtu", r.active_mtu},
                    {"gids", gids}});
  }
  nlohmann::json netdevs = nlohmann::json::array();
  for (const auto& n : f.netdevs) {
    netdevs.push_back({{"name", n.name},
                       {"present", n.present},
                       {"operstate", n.operstate},
                       {"mtu", n.mtu},
                       {"ipv4", n.ipv4}});
  }
  return {
      {"schema", f.schema},
      {"hostname", f.hostname},
      {"machine_id", f.machine_id},
      {"kernel", f.kernel},
      {"os", f.os},
      {"platform", bundle::PlatformToJson(f.platform)},
      {"dgx_release", f.dgx_release},
      {"mem_total_kib", f.mem_total_kib},
      {"mem_available_kib", f.mem_available_kib},
      {"cma_total_kib", f.cma_total_kib},
      {"cma_free_kib", f.cma_free_kib},
      {"memlock", f.memlock},
      {"gpu",
       {{"present", f.gpu.present},
        {"name", f.gpu.name},
        {"driver", f.gpu.driver},
        {"sm_clock_mhz", f.gpu.sm_clock_mhz},
        {"max_sm_clock_mhz", f.gpu.max_sm_clock_mhz},
        {"memory_mib", f.gpu.memory_mib},
        {"error", f.gpu.error}}},
      {"rdma", rdma},
      {"netdevs", netdevs},
      {"disk_path", f.disk_path},
      {"disk_free_bytes", f.disk_free_bytes},
      {"disk_path_exists", f.disk_path_exists},
      {"nccl_conf_present", f.nccl_conf_present},
      {"nccl_conf", f.nccl_conf},
      {"forward_policy", f.forward_policy},
      {"sparkctl_version", f.sparkctl_version},
  };
}

Result<NodeFacts> FactsFromJson(const nlohmann::json& j) {
  try {
    NodeFacts f;
    f.schema = j.at("schema").get<std::string>();
    if (f.schema != kFactsSchema) {
      return InvalidArgumentError("node facts have schema '" + f.schema + "', expected " +
                                  kFactsSchema + " (is the node running another sparkctl build?)");
    }
    f.hostname = j.at("hostname").get<std::string>();
    f.machine_id = j.at("machine_id").get<std::string>();
    f.kernel = j.at("kernel").get<std::string>();
    f.os = j.at("os").get<std::string>();
    SPARK_ASSIGN_OR_RETURN(f.platform, bundle::PlatformFromJson(j.at("platform")));
    f.dgx_release = j.at("dgx_release").get<std::string>();
    f.mem_total_kib = j.at("mem_total_kib").get<int64_t>();
    f.mem_available_kib = j.at("mem_available_kib").get<int64_t>();
    f.cma_total_kib = j.at("cma_total_kib").get<int64_t>();
    f.cma_free_kib = j.at("cma_free_kib").get<int64_t>();
    f.memlock = j.at("memlock").get<std::string>();
    const auto& g = j.at("gpu");
    f.gpu = {g.at("present").get<bool>(),      g.at("name").get<std::string>(),
             g.at("driver").get<std::string>(), g.at("sm_clock_mhz").get<int>(),
             g.at("max_sm_clock_mhz").get<int>(), g.at("memory_mib").get<int64_t>(),
             g.at("error").get<std::string>()};
    for (const auto& r : j.at("rdma")) {
      RdmaDeviceFacts d{r.at("name").get<std::string>(), r.at("netdev").get<std::string>(),
                        r.at("state").get<std::string>(), r.at("active_mtu").get<int>(), {}};
      for (const auto& e : r.at("gids")) {
        d.gids.push_back({e.at("index").get<int>(), e.at("gid").get<std::string>(),
                          e.at("type").get<std::string>(), e.at("netdev").get<std::string>()});
      }
      f.rdma.push_back(std::move(d));
    }
    for (const auto& n : j.at("netdevs")) {
      f.netdevs.push_back({n.at("name").get<std::string>(), n.at("present").get<bool>(),
                           n.at("operstate").get<std::string>(), n.at("mtu").get<int>(),
                           n.at("ipv4").get<std::vector<std::string>>()});
    }
    f.disk_path = j.at("disk_path").get<std::string>();
    f.disk_free_bytes = j.at("disk_free_bytes").get<int64_t>();
    f.disk_path_exists = j.at("disk_path_exists").get<bool>();
    f.nccl_conf_present = j.at("nccl_conf_present").get<bool>();
    f.nccl_conf = j.at("nccl_conf").get<std::string>();
    f.forward_policy = j.at("forward_policy").get<std::string>();
    f.sparkctl_version = j.at("sparkctl_version").get<std::string>();
    return f;
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(std::string("malformed node facts: ") + e.what());
  }
}

}  // namespace spark::host
