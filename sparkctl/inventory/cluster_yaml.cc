#include "sparkctl/inventory/cluster_yaml.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/strings.h"
#include "base/yaml_reader.h"

namespace spark::inventory {
namespace {

using netplan::ClusterSpec;
using netplan::NodeSpec;
using netplan::PortSpec;

void ReadSsh(YamlReader* r, const YAML::Node& node, netplan::SshSpec* ssh) {
  YamlMap map(r, node, "ssh");
  map.Optional("user", &ssh->user);
  map.Optional("port", &ssh->port);
  map.Optional("identity_file", &ssh->identity_file);
  map.Optional("known_hosts", &ssh->known_hosts);
  map.Optional("connect_timeout_s", &ssh->connect_timeout_s);
  map.Optional("command_timeout_s", &ssh->command_timeout_s);
  map.RejectUnknown();
}

void ReadPort(YamlReader* r, const YAML::Node& node, const std::string& path, PortSpec* port) {
  YamlMap map(r, node, path);
  map.Required("name", &port->name);
  YAML::Node peer = map.ChildMap("peer", false);
  if (peer.IsDefined() && !peer.IsNull()) {
    YamlMap pm(r, peer, path + ".peer");
    netplan::PortPeer p;
    pm.Required("node", &p.node);
    pm.Required("port", &p.port);
    pm.RejectUnknown();
    port->peer = p;
  }
  map.RejectUnknown();
}

void ReadNode(YamlReader* r, const YAML::Node& node, const std::string& path, NodeSpec* n) {
  YamlMap map(r, node, path);
  map.Required("name", &n->name);
  map.Required("address", &n->address);
  map.Optional("machine_id", &n->machine_id);
  int rank = 0;
  if (map.Optional("rank", &rank)) n->rank = rank;
  YAML::Node ports = map.ChildSeq("ports", false);
  for (size_t i = 0; ports.IsDefined() && i < ports.size(); ++i) {
    PortSpec port;
    ReadPort(r, ports[i], path + ".ports[" + std::to_string(i) + "]", &port);
    n->ports.push_back(std::move(port));
  }
  map.RejectUnknown();
}

void ReadFabric(YamlReader* r, const YAML::Node& node, netplan::FabricSpec* f) {
  YamlMap map(r, node, "fabric");
  std::string kind;
  if (map.Optional("kind", &kind)) {
    f->kind = netplan::ParseTopology(kind);
    if (!f->kind) {
      r->AddError("fabric.kind", "'" + kind + "' is not a topology (single, pair, ring, line, switched)" +
                                     DidYouMean(kind, {"single", "pair", "ring", "line", "switched"}));
    }
  }
  map.Optional("cidr", &f->cidr);
  map.Optional("mtu", &f->mtu);
  map.RejectUnknown();
}

Result<ClusterSpec> Read(YamlReader reader) {
  ClusterSpec spec;
  YamlMap root(&reader, reader.root(), "");
  root.Required("schema", &spec.schema);
  root.Required("name", &spec.name);
  YAML::Node ssh = root.ChildMap("ssh", false);
  if (ssh.IsDefined()) ReadSsh(&reader, ssh, &spec.ssh);
  YAML::Node nodes = root.ChildSeq("nodes", true);
  for (size_t i = 0; nodes.IsDefined() && i < nodes.size(); ++i) {
    NodeSpec node;
    ReadNode(&reader, nodes[i], "nodes[" + std::to_string(i) + "]", &node);
    spec.nodes.push_back(std::move(node));
  }
  YAML::Node fabric = root.ChildMap("fabric", false);
  if (fabric.IsDefined()) ReadFabric(&reader, fabric, &spec.fabric);
  YAML::Node control = root.ChildMap("control_plane", false);
  if (control.IsDefined()) {
    YamlMap map(&reader, control, "control_plane");
    map.Optional("cidr", &spec.control_plane.cidr);
    map.Optional("port", &spec.control_plane.port);
    map.RejectUnknown();
  }
  root.RejectUnknown();
  if (reader.ok()) {
    FieldErrors errors;
    netplan::Validate(spec, &errors);
    reader.AddAll(errors);
  }
  SPARK_RETURN_IF_ERROR(reader.ToStatus());
  return spec;
}

}  // namespace

Result<ClusterSpec> LoadClusterFile(const std::string& path) {
  auto reader = YamlReader::FromFile(path);
  if (!reader.ok() && reader.status().code() == StatusCode::kNotFound) {
    return NotFoundError(path + ": no such inventory; create one with `sparkctl discover --hosts "
                                "A,B,...` (or `sparkctl sim create` for a simulated cluster) or "
                                "pass -c FILE");
  }
  SPARK_RETURN_IF_ERROR(reader.status());
  return Read(std::move(reader).value());
}

Result<ClusterSpec> ParseCluster(const std::string& text, const std::string& file) {
  SPARK_ASSIGN_OR_RETURN(YamlReader reader, YamlReader::FromString(text, file));
  return Read(std::move(reader));
}

std::string ToYaml(const ClusterSpec& spec) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "schema" << YAML::Value << spec.schema;
  out << YAML::Key << "name" << YAML::Value << spec.name;
  out << YAML::Key << "ssh" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "user" << YAML::Value << spec.ssh.user;
  out << YAML::Key << "port" << YAML::Value << spec.ssh.port;
  if (!spec.ssh.identity_file.empty())
    out << YAML::Key << "identity_file" << YAML::Value << spec.ssh.identity_file;
  if (!spec.ssh.known_hosts.empty())
    out << YAML::Key << "known_hosts" << YAML::Value << spec.ssh.known_hosts;
  out << YAML::Key << "connect_timeout_s" << YAML::Value << spec.ssh.connect_timeout_s;
  out << YAML::Key << "command_timeout_s" << YAML::Value << spec.ssh.command_timeout_s;
  out << YAML::EndMap;
  out << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  for (const NodeSpec& n : spec.nodes) {
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << n.name;
    out << YAML::Key << "address" << YAML::Value << n.address;
    if (!n.machine_id.empty()) out << YAML::Key << "machine_id" << YAML::Value << n.machine_id;
    if (n.rank) out << YAML::Key << "rank" << YAML::Value << *n.rank;
    if (!n.ports.empty()) {
      out << YAML::Key << "ports" << YAML::Value << YAML::BeginSeq;
      for (const PortSpec& p : n.ports) {
        out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << p.name;
        if (p.peer) {
          out << YAML::Key << "peer" << YAML::Value << YAML::Flow << YAML::BeginMap;
          out << YAML::Key << "node" << YAML::Value << p.peer->node;
          out << YAML::Key << "port" << YAML::Value << p.peer->port << YAML::EndMap;
        }
        out << YAML::EndMap;
      }
      out << YAML::EndSeq;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "fabric" << YAML::Value << YAML::BeginMap;
  if (spec.fabric.kind) {
    out << YAML::Key << "kind" << YAML::Value << std::string(netplan::TopologyName(*spec.fabric.kind));
  }
  out << YAML::Key << "cidr" << YAML::Value << spec.fabric.cidr;
  out << YAML::Key << "mtu" << YAML::Value << spec.fabric.mtu << YAML::EndMap;
  out << YAML::Key << "control_plane" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "cidr" << YAML::Value << spec.control_plane.cidr;
  out << YAML::Key << "port" << YAML::Value << spec.control_plane.port << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

nlohmann::ordered_json ToJson(const ClusterSpec& spec) {
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  for (const NodeSpec& n : spec.nodes) {
    nlohmann::ordered_json ports = nlohmann::ordered_json::array();
    for (const PortSpec& p : n.ports) {
      nlohmann::ordered_json port = {{"name", p.name}};
      port["peer"] = p.peer ? nlohmann::ordered_json{{"node", p.peer->node}, {"port", p.peer->port}}
                            : nlohmann::ordered_json(nullptr);
      ports.push_back(port);
    }
    nodes.push_back({{"name", n.name},
                     {"address", n.address},
                     {"machine_id", n.machine_id},
                     {"rank", n.rank ? nlohmann::ordered_json(*n.rank) : nullptr},
                     {"ports", ports}});
  }
  return {
      {"schema", spec.schema},
      {"name", spec.name},
      {"ssh",
       {{"user", spec.ssh.user},
        {"port", spec.ssh.port},
        {"identity_file", spec.ssh.identity_file},
        {"known_hosts", spec.ssh.known_hosts},
        {"connect_timeout_s", spec.ssh.connect_timeout_s},
        {"command_timeout_s", spec.ssh.command_timeout_s}}},
      {"nodes", nodes},
      {"fabric",
       {{"kind", spec.fabric.kind ? nlohmann::ordered_json(netplan::TopologyName(*spec.fabric.kind))
                                  : nullptr},
        {"cidr", spec.fabric.cidr},
        {"mtu", spec.fabric.mtu}}},
      {"control_plane", {{"cidr", spec.control_plane.cidr}, {"port", spec.control_plane.port}}},
  };
}

Status WriteClusterFile(const ClusterSpec& spec, const std::string& path) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return ErrnoError(errno, tmp);
    out << ToYaml(spec);
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return ErrnoError(errno, "writing " + tmp);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    return ErrnoError(err, "renaming " + tmp + " to " + path);
  }
  return Status::Ok();
}

}  // namespace spark::inventory
