// Identity beacons on the fabric links (`sparkctl node beacon`): each node brings its fabric
// netdevs up, sends a small raw Ethernet frame (local EtherType 0x88B5) naming itself and the
// netdev on every link, and records the beacons it hears. Run on all nodes at once, this tells
// each port which node and port is at the other end of its cable, with no addresses configured.
//
// Needs CAP_NET_RAW (root). Frames never leave the fabric links (no IP, no routing).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace spark::host {

inline constexpr uint16_t kBeaconEtherType = 0x88B5;  // IEEE local experimental

struct BeaconIdentity {
  std::string machine_id;
  std::string hostname;
};

// This machine's identity as the facts report it (/etc/machine-id, the kernel hostname).
BeaconIdentity LocalBeaconIdentity();

struct BeaconSighting {
  std::string local_netdev;
  std::string peer_machine_id;
  std::string peer_hostname;
  std::string peer_netdev;
};

struct BeaconReport {
  std::string schema = "sparkctl-node-beacon/v1";
  BeaconIdentity self;
  std::vector<std::string> netdevs_up;       // fabric netdevs found and brought up
  std::vector<std::string> netdevs_missing;  // fabric netdevs this node does not have
  std::vector<BeaconSighting> sightings;
};

// Sends and listens on every listed netdev for at most `duration`. With expected_peers > 0 (the
// other nodes of the inventory) the run ends early once BeaconCanStop says so. Netdevs that do
// not exist are listed as missing; PermissionDenied without CAP_NET_RAW.
Result<BeaconReport> RunBeacons(const BeaconIdentity& self, const std::vector<std::string>& netdevs,
                                std::chrono::milliseconds duration, int expected_peers = 0);

// What a beacon run has seen so far, for the early-stop rule.
struct BeaconProgress {
  int links_waited = 0;       // links that should hear a peer (up, or brought up by us)
  int links_heard = 0;        // of those, links that heard at least one peer
  int peers_heard = 0;        // distinct peer nodes heard on any link
  int max_peers_on_link = 0;  // the most distinct peers one link heard (> 1: a switch rail)
  int expected_peers = 0;     // the other nodes of the inventory
  std::chrono::milliseconds since_last_new_peer{0};
};

// True when a run may end before its maximum: every waited link heard a peer, our frames went
// out at least twice since the last new peer appeared (so that peer heard us too), and nothing
// more can come: every other node was heard, or every link is point-to-point (one peer each)
// and the links reach at least two different nodes (a ring node with both neighbours). A switch
// rail with peers still missing, or one single peer on every link of a larger cluster (a late
// starter could still join a switch), waits for the rest or the maximum.
bool BeaconCanStop(const BeaconProgress& progress);

// Beacon payload encoding, exposed for tests.
std::string EncodeBeacon(const BeaconIdentity& self, const std::string& netdev);
bool DecodeBeacon(std::string_view payload, BeaconSighting* sighting);

nlohmann::json ToJson(const BeaconReport& report);
Result<BeaconReport> BeaconReportFromJson(const nlohmann::json& json);

}  // namespace spark::host
