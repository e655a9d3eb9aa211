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

// Sends and listens on every listed netdev for `duration`. Netdevs that do not exist are listed
// as missing; PermissionDenied without CAP_NET_RAW.
Result<BeaconReport> RunBeacons(const BeaconIdentity& self, const std::vector<std::string>& netdevs,
                                std::chrono::milliseconds duration);

// Beacon payload encoding, exposed for tests.
std::string EncodeBeacon(const BeaconIdentity& self, const std::string& netdev);
bool DecodeBeacon(std::string_view payload, BeaconSighting* sighting);

nlohmann::json ToJson(const BeaconReport& report);
Result<BeaconReport> BeaconReportFromJson(const nlohmann::json& json);

}  // namespace spark::host
