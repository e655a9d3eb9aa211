// libibverbs view of the RDMA devices (see verbs.h).
#include "sparkctl/rdma/verbs.h"

#include <cstdio>

#include "base/strings.h"
#ifdef SPARK_HAVE_IBVERBS
#include <infiniband/verbs.h>
#endif

namespace spark::rdma {
namespace {

#ifdef SPARK_HAVE_IBVERBS
const char* PortStateName(int s) {
  switch (s) {
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    default: return "UNKNOWN";
  }
}

std::string GidText(const ibv_gid& g) {
  char buf[48];
  const uint8_t* r = g.raw;
  std::snprintf(buf, sizeof(buf), "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
                r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12],
                r[13], r[14], r[15]);
  return buf;
}

VerbsDevice Inspect(ibv_device* dev) {
  VerbsDevice d;
  d.name = ibv_get_device_name(dev);
  ibv_context* ctx = ibv_open_device(dev);
  if (!ctx) {
    d.error = "ibv_open_device failed (is /dev/infiniband/uverbs* present and readable?)";
    return d;
  }
  d.opened = true;
  ibv_device_attr attr{};
  if (ibv_query_device(ctx, &attr) != 0) {
    d.error = "ibv_query_device failed";
    ibv_close_device(ctx);
    return d;
  }
  for (int p = 1; p <= attr.phys_port_cnt; ++p) {
    ibv_port_attr pa{};
    if (ibv_query_port(ctx, p, &pa) != 0) continue;
    VerbsPort port{p, PortStateName(pa.state), MtuEnumToBytes(pa.active_mtu), {}};
    for (int i = 0; i < pa.gid_tbl_len && i < 32; ++i) {
      ibv_gid gid{};
      bool empty = ibv_query_gid(ctx, p, i, &gid) != 0;
      std::string text = empty ? "" : GidText(gid);
      if (text == "0000:0000:0000:0000:0000:0000:0000:0000") text.clear();
      port.gids.push_back(text);
    }
    d.ports.push_back(port);
  }
  ibv_close_device(ctx);
  return d;
}
#endif

}  // namespace

bool VerbsReport::AnyOpened() const {
  for (const VerbsDevice& d : devices)
    if (d.opened) return true;
  return false;
}

int MtuEnumToBytes(int mtu_enum) {
  return mtu_enum >= 1 && mtu_enum <= 5 ? 128 << mtu_enum : 0;
}

VerbsReport ListVerbsDevices() {
  VerbsReport r;
#ifdef SPARK_HAVE_IBVERBS
  r.built_with_verbs = true;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) {
    r.note = "ibv_get_device_list failed: no RDMA subsystem (load the mlx5_ib module)";
    return r;
  }
  for (int i = 0; i < n; ++i) r.devices.push_back(Inspect(list[i]));
  ibv_free_device_list(list);
  if (n == 0) r.note = "libibverbs found no device";
#else
  r.note = "built without libibverbs (install libibverbs-dev and rebuild)";
#endif
  return r;
}

std::string NoVerbsDeviceMessage(const VerbsReport& report,
                                 const std::vector<std::string>& sysfs_devices) {
  std::string why = report.note.empty() ? "no RDMA device could be opened" : report.note;
  std::string out = "no RDMA verbs device usable here (" + why + ")";
  if (!sysfs_devices.empty()) {
    out += "; sysfs lists " + Join(sysfs_devices, ", ") +
           " but libibverbs cannot open them: check /dev/infiniband/uverbs*, the mlx5_ib module "
           "and the rdma-core provider (ibv_devices should list them)";
  } else {
    out += "; /sys/class/infiniband is empty: no RDMA hardware or driver on this node";
  }
  return out + ". Measurements use TCP sockets instead, not RDMA.";
}

nlohmann::json ToJson(const VerbsReport& r) {
  nlohmann::json devices = nlohmann::json::array();
  for (const VerbsDevice& d : r.devices) {
    nlohmann::json ports = nlohmann::json::array();
    for (const VerbsPort& p : d.ports) {
      ports.push_back({{"port", p.port}, {"state", p.state}, {"active_mtu", p.active_mtu},
                       {"gids", p.gids}});
    }
    devices.push_back({{"name", d.name}, {"opened", d.opened}, {"error", d.error},
                       {"ports", ports}});
  }
  return {{"schema", "sparkctl-rdma-info/v1"}, {"built_with_verbs", r.built_with_verbs},
          {"devices", devices}, {"note", r.note}};
}

Result<VerbsReport> VerbsReportFromJson(const nlohmann::json& j) {
  try {
    VerbsReport r;
    r.built_with_verbs = j.at("built_with_verbs").get<bool>();
    r.note = j.at("note").get<std::string>();
    for (const auto& d : j.at("devices")) {
      VerbsDevice dev{d.at("name").get<std::string>(), d.at("opened").get<bool>(),
                      d.at("error").get<std::string>(), {}};
      for (const auto& p : d.at("ports")) {
        dev.ports.push_back({p.at("port").get<int>(), p.at("state").get<std::string>(),
                             p.at("active_mtu").get<int>(),
                             p.at("gids").get<std::vector<std::string>>()});
      }
      r.devices.push_back(dev);
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(std::string("rdma-info JSON: ") + e.what());
  }
}

}  // namespace spark::rdma
