// The beacon early-stop rule (BeaconCanStop) and the beacon payload round trip.
#include "sparkctl/host/beacon.h"

#include <gtest/gtest.h>

namespace spark::host {
namespace {

using std::chrono::milliseconds;

// A 4-node ring seen from one node: 4 links each heard (twins of p0 hear the next node, twins of
// p1 the previous one): 2 distinct neighbours of 3 other nodes, one peer per link.
BeaconProgress RingNode() {
  BeaconProgress p;
  p.links_waited = 4;
  p.links_heard = 4;
  p.peers_heard = 2;
  p.max_peers_on_link = 1;
  p.expected_peers = 3;
  p.since_last_new_peer = milliseconds(200);
  return p;
}

TEST(BeaconCanStopTest, RingNodeWithBothNeighboursStops) { EXPECT_TRUE(BeaconCanStop(RingNode())); }

TEST(BeaconCanStopTest, NeverWithoutAnExpectedPeerCount) {
  BeaconProgress p = RingNode();
  p.expected_peers = 0;
  p.since_last_new_peer = milliseconds(5000);
  EXPECT_FALSE(BeaconCanStop(p));
}

TEST(BeaconCanStopTest, WaitsWhileALinkIsSilent) {
  BeaconProgress p = RingNode();
  p.links_heard = 3;
  p.since_last_new_peer = milliseconds(5000);
  EXPECT_FALSE(BeaconCanStop(p));
  p.links_waited = 0;  // nothing to wait for is no reason to stop early either
  p.links_heard = 0;
  EXPECT_FALSE(BeaconCanStop(p));
}

TEST(BeaconCanStopTest, NewestPeerGetsTwoMoreSendRounds) {
  BeaconProgress p = RingNode();
  p.since_last_new_peer = milliseconds(150);
  EXPECT_FALSE(BeaconCanStop(p));
}

TEST(BeaconCanStopTest, SwitchRailWaitsForEveryNode) {
  // A switched 4-node cluster where one node has not started yet: each rail hears 2 peers.
  BeaconProgress p = RingNode();
  p.max_peers_on_link = 2;
  p.since_last_new_peer = milliseconds(5000);
  EXPECT_FALSE(BeaconCanStop(p));
  p.peers_heard = 3;
  p.max_peers_on_link = 3;
  EXPECT_TRUE(BeaconCanStop(p));
}

TEST(BeaconCanStopTest, OnePeerOnEveryLinkOfALargerClusterWaits) {
  // Could be a switch where only one other node has started so far.
  BeaconProgress p = RingNode();
  p.peers_heard = 1;
  p.since_last_new_peer = milliseconds(5000);
  EXPECT_FALSE(BeaconCanStop(p));
  p.expected_peers = 1;  // a pair: nothing else can come
  EXPECT_TRUE(BeaconCanStop(p));
}

TEST(BeaconPayloadTest, RoundTripsAndRejectsForeignFrames) {
  std::string payload = EncodeBeacon({"abc123", "spark-2"}, "enp1s0f1np1");
  BeaconSighting s;
  ASSERT_TRUE(DecodeBeacon(payload, &s));
  EXPECT_EQ(s.peer_machine_id, "abc123");
  EXPECT_EQ(s.peer_hostname, "spark-2");
  EXPECT_EQ(s.peer_netdev, "enp1s0f1np1");
  EXPECT_FALSE(DecodeBeacon("OTHER-PROTOCOL\nabc\nhost\nnetdev\n", &s));
  EXPECT_FALSE(DecodeBeacon(payload.substr(0, 20), &s));
}

}  // namespace
}  // namespace spark::host
