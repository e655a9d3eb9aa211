// The RDMA verbs wire without RDMA hardware: the immediate's encoding, the split over rails, the
// sequence rebuilt from the immediate's low bits, the endpoint text, the rail flag, and that
// connecting to a device this machine lacks fails naming it (or says the build has no verbs).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "comm/local_communicator.h"
#include "comm/oneshot/oneshot_communicator.h"
#include "comm/oneshot/setup.h"
#include "comm/oneshot/verbs_protocol.h"

namespace spark::comm::oneshot {
namespace {

TEST(VerbsProtocolTest, ImmediateRoundTrips) {
  for (const Imm& imm : {Imm{0, 0, 1, 1}, Imm{63, 3, 4, kImmSeqMask}, Imm{7, 1, 2, 12345},
                         Imm{kImmAbort, 0, 1, 200}, Imm{kImmBye, 0, 1, 0}}) {
    const Imm back = DecodeImm(EncodeImm(imm));
    EXPECT_EQ(back.source, imm.source);
    EXPECT_EQ(back.part, imm.part);
    EXPECT_EQ(back.parts, imm.parts);
    EXPECT_EQ(back.seq_low, imm.seq_low);
  }
  // Fields do not bleed into each other.
  EXPECT_EQ(EncodeImm({1, 0, 1, 0}), 0x01000000u);
  EXPECT_EQ(EncodeImm({0, 1, 1, 0}), 0x00400000u);
  EXPECT_EQ(EncodeImm({0, 0, 2, 0}), 0x00100000u);
}

TEST(VerbsProtocolTest, SlicesSplitOverRailsFromTheStripeSize) {
  auto one = SplitParts(4096, 2, 65536);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].bytes, 4096u);
  auto two = SplitParts(100000, 2, 65536);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].offset, 0u);
  EXPECT_EQ(two[0].bytes % 64, 0u);
  EXPECT_EQ(two[1].offset, two[0].bytes);
  EXPECT_EQ(two[0].bytes + two[1].bytes, 100000u);
  auto zero = SplitParts(0, 2, 65536);
  ASSERT_EQ(zero.size(), 1u);
  EXPECT_EQ(zero[0].bytes, 0u);
  EXPECT_EQ(SplitParts(1 << 20, 8, 65536).size(), static_cast<size_t>(kMaxParts));
}

TEST(VerbsProtocolTest, SequenceIsRebuiltOrARefusalNamesBothCalls) {
  EXPECT_EQ(*RebuildSeq(7, 7), 7u);
  const uint64_t big = (uint64_t{5} << 20) + 3;
  EXPECT_EQ(*RebuildSeq(big, 3), big);
  auto wrong = RebuildSeq(9, 11);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("expected call 9"), std::string::npos);
}

TEST(VerbsProtocolTest, EndpointsRoundTripAndMalformedLinesAreNamed) {
  RailEndpoint e;
  e.peer = 3;
  e.rail = 1;
  e.qpn = 0x1a2b;
  e.psn = 0xabcdef;
  e.lid = 0;
  e.mtu = 5;
  for (int i = 0; i < 16; ++i) e.gid[i] = static_cast<uint8_t>(i * 17);
  e.addr = 0x7f0012345000;
  e.rkey = 0xdeadbeef;
  auto back = DecodeEndpoints(EncodeEndpoints({e, e}));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].qpn, e.qpn);
  EXPECT_EQ((*back)[1].gid, e.gid);
  EXPECT_EQ((*back)[1].addr, e.addr);
  EXPECT_EQ((*back)[1].rkey, e.rkey);
  auto bad = DecodeEndpoints("1 0 2 3\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 1"), std::string::npos);
}

TEST(VerbsProtocolTest, RailsParseOrAreRefusedWithTheForm) {
  auto a = ParseRail("rocep1s0f0:3");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->device, "rocep1s0f0");
  EXPECT_EQ(a->port, 1);
  EXPECT_EQ(a->gid_index, 3);
  auto b = ParseRail("roceP2p1s0f1:1:5");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->gid_index, 5);
  for (const char* bad : {"rocep1s0f0", ":3", "rocep1s0f0:x", "a:0:3"}) {
    auto r = ParseRail(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("DEVICE:GID_INDEX"), std::string::npos);
  }
}

// --oneshot-traffic-class: checked, carried to the options and back to the flags, refused
// outside 0-255 and on the socket wire, naming the flag.
TEST(VerbsProtocolTest, TrafficClassIsCheckedAndCarried) {
  OneShotSettings s;
  s.max_bytes = 65536;
  s.wire = "rdma";
  s.rails = "rocep1s0f0:3";
  s.traffic_class = 106;
  auto o = s.ToOptions("198.18.0.1", std::chrono::milliseconds(1000));
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->traffic_class, 106);
  const std::vector<std::string> argv = s.Argv();
  auto at = std::find(argv.begin(), argv.end(), "--oneshot-traffic-class");
  ASSERT_NE(at, argv.end());
  EXPECT_EQ(*(at + 1), "106");
  for (int bad : {-1, 256}) {
    s.traffic_class = bad;
    Status v = s.Validate();
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_NE(v.message().find("--oneshot-traffic-class"), std::string::npos) << v.message();
  }
  s.traffic_class = 106;
  s.wire = "socket";
  Status socket = s.Validate();
  ASSERT_FALSE(socket.ok());
  EXPECT_NE(socket.message().find("rdma only"), std::string::npos) << socket.message();
  s.traffic_class = 0;
  EXPECT_TRUE(s.Validate().ok());
  const std::vector<std::string> plain = s.Argv();
  EXPECT_EQ(std::find(plain.begin(), plain.end(), "--oneshot-traffic-class"), plain.end());
}

// No RDMA device here: the wire names the missing device (and what verbs lists), or says the
// build has no libibverbs; it never falls back to another wire silently.
TEST(VerbsWireTest, AMissingDeviceIsNamed) {
  auto locals = CreateLocalGroup(2);
  std::vector<Status> got(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      OneShotOptions o;
      o.wire = "rdma";
      o.rails = {{RailSpec{"rocep-not-here", 1, 3}}};
      o.transport.timeout = std::chrono::milliseconds(2000);
      got[r] = OneShotCommunicator::Create(std::move(locals[r]), o).status();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(got[r].ok());
#if SPARK_TEST_HAVE_IBVERBS
    EXPECT_TRUE(got[r].code() == StatusCode::kNotFound || got[r].code() == StatusCode::kUnavailable)
        << got[r].ToString();
    EXPECT_NE(got[r].message().find("rocep-not-here"), std::string::npos) << got[r].ToString();
#else
    EXPECT_EQ(got[r].code(), StatusCode::kUnimplemented) << got[r].ToString();
#endif
  }
}

}  // namespace
}  // namespace spark::comm::oneshot
