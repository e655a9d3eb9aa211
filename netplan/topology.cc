#include "netplan/topology.h"

#include <map>
#include <optional>

namespace spark::netplan {
namespace {

// A cable end as the checks see it: which node (by rank) and which port.
struct Plug {
  int rank = -1;
  int port = -1;
  friend bool operator==(const Plug&, const Plug&) = default;
};

int PortIndex(std::string_view name) { return name == "p1" ? 1 : 0; }

class Cabling {
 public:
  explicit Cabling(const std::vector<const NodeSpec*>& by_rank) : nodes_(by_rank) {
    std::map<std::string, int> rank_of;
    for (size_t r = 0; r < by_rank.size(); ++r) rank_of[by_rank[r]->name] = static_cast<int>(r);
    peers_.assign(by_rank.size() * 2, std::nullopt);
    for (size_t r = 0; r < by_rank.size(); ++r) {
      for (const PortSpec& port : by_rank[r]->ports) {
        if (!port.peer) continue;
        peers_[r * 2 + PortIndex(port.name)] =
            Plug{rank_of.at(port.peer->node), PortIndex(port.peer->port)};
      }
    }
  }

  std::optional<Plug> PeerOf(int rank, int port) const { return peers_[rank * 2 + port]; }

  // "rank 1 (spark-b) p0".
  std::string Describe(Plug plug) const {
    return "rank " + std::to_string(plug.rank) + " (" + nodes_[plug.rank]->name + ") p" +
           std::to_string(plug.port);
  }

 private:
  std::vector<const NodeSpec*> nodes_;
  std::vector<std::optional<Plug>> peers_;
};

// The message for a port-0 cable of a ring or line that does not reach `want`.
std::string WrongCable(const Cabling& c, Plug from, Plug want, std::optional<Plug> got) {
  std::string text = c.Describe(from) + " should be cabled to " + c.Describe(want);
  if (!got) return text + ", but nothing is plugged in";
  text += ", but is cabled to " + c.Describe(*got);
  if (got->rank == want.rank && got->port != want.port) {
    text += "; move the cable end at " + c.Describe(*got) + " to p" + std::to_string(want.port);
    if (got->port == 0 && from.port == 0) {
      text += " (p0<->p0 on a ring fails later with ibv_modify_qp error 110)";
    }
  } else {
    text += "; re-run `sparkctl discover` if the cables were moved, else re-cable";
  }
  return text;
}

// Ring and line: cable e leaves p0 of rank e and lands on p1 of rank e+1.
void ChainCables(const Cabling& c, int n, bool closed, Topology* topo, FieldErrors* errors) {
  int count = closed ? n : n - 1;
  for (int e = 0; e < count; ++e) {
    Plug from{e, 0}, want{(e + 1) % n, 1};
    std::optional<Plug> got = c.PeerOf(e, 0);
    if (got != want) {
      errors->Add("nodes", WrongCable(c, from, want, got));
      continue;
    }
    topo->cables.push_back(Cable{e, CableEnd{from.rank, 0}, CableEnd{want.rank, 1}});
  }
  if (closed) return;
  if (std::optional<Plug> extra = c.PeerOf(n - 1, 0)) {
    std::string hint = *extra == Plug{0, 1} ? "; this is a closed ring: set fabric.kind: ring"
                                            : "; unplug it";
    errors->Add("nodes", "line: " + c.Describe(Plug{n - 1, 0}) + " is the open end and should be "
                         "unplugged, but is cabled to " + c.Describe(*extra) + hint);
  }
}

void PairCables(const Cabling& c, Topology* topo, FieldErrors* errors) {
  for (int port = 0; port < 2; ++port) {
    std::optional<Plug> peer = c.PeerOf(0, port);
    if (!peer) continue;
    Cable cable{static_cast<int>(topo->cables.size()), CableEnd{0, port}, CableEnd{1, peer->port}};
    if (port == 1 && peer->port == 0) std::swap(cable.a, cable.b);  // the p0 end is "a"
    topo->cables.push_back(cable);
  }
  if (topo->cables.empty()) {
    errors->Add("nodes", "pair: no cable between rank 0 (" + topo->names[0] + ") and rank 1 (" +
                             topo->names[1] + "); plug a cable from p0 to p0");
  }
}

void SwitchedCables(const Cabling& c, int n, FieldErrors* errors) {
  for (int r = 0; r < n; ++r) {
    for (int port = 0; port < 2; ++port) {
      if (std::optional<Plug> peer = c.PeerOf(r, port); peer && r < peer->rank) {
        errors->Add("nodes", "switched: " + c.Describe(Plug{r, port}) + " is cabled directly to " +
                                 c.Describe(*peer) + "; on a switched fabric every port goes to "
                                 "the switch (or set fabric.kind to pair, line or ring)");
      }
    }
  }
}

Result<std::vector<const NodeSpec*>> NodesByRank(const ClusterSpec& spec) {
  std::vector<const NodeSpec*> by_rank(spec.nodes.size(), nullptr);
  for (const NodeSpec& node : spec.nodes) {
    if (!node.rank) {
      return FailedPreconditionError("node " + node.name +
                                     " has no rank yet; run `sparkctl discover` first");
    }
    by_rank[*node.rank] = &node;  // Validate() checked range and uniqueness
  }
  return by_rank;
}

}  // namespace

const Cable* Topology::CableAt(int rank, int port) const {
  for (const Cable& cable : cables) {
    if ((cable.a.rank == rank && cable.a.port == port) ||
        (cable.b.rank == rank && cable.b.port == port)) {
      return &cable;
    }
  }
  return nullptr;
}

Result<Topology> BuildTopology(const ClusterSpec& spec) {
  FieldErrors errors;
  Validate(spec, &errors);
  SPARK_RETURN_IF_ERROR(errors.ToStatus("cluster " + spec.name));
  if (!spec.fabric.kind) {
    return FailedPreconditionError("fabric.kind is not known yet; run `sparkctl discover` first");
  }
  if (*spec.fabric.kind == TopologyKind::kSingle) {
    return InvalidArgumentError("a single-node cluster has no fabric to plan");
  }
  SPARK_ASSIGN_OR_RETURN(std::vector<const NodeSpec*> by_rank, NodesByRank(spec));
  Topology topo;
  topo.kind = *spec.fabric.kind;
  for (const NodeSpec* node : by_rank) topo.names.push_back(node->name);
  Cabling cabling(by_rank);
  int n = topo.node_count();
  switch (topo.kind) {
    case TopologyKind::kRing: ChainCables(cabling, n, true, &topo, &errors); break;
    case TopologyKind::kLine: ChainCables(cabling, n, false, &topo, &errors); break;
    case TopologyKind::kPair: PairCables(cabling, &topo, &errors); break;
    case TopologyKind::kSwitched: SwitchedCables(cabling, n, &errors); break;
    case TopologyKind::kSingle: break;
  }
  SPARK_RETURN_IF_ERROR(errors.ToStatus("cabling does not match fabric.kind " +
                                        std::string(TopologyName(topo.kind))));
  return topo;
}

}  // namespace spark::netplan
