// The pure parts of the RDMA verbs wire (verbs_wire.h), kept apart so they are tested without
// RDMA hardware: the 32-bit immediate that each RDMA WRITE WITH IMMEDIATE carries, how a slice
// is split over the rails (the two PCIe functions, "twins", of one ConnectX-7 port), how a
// receiver rebuilds the 64-bit sequence number from the immediate's low bits, and the text each
// rank publishes about its queue pairs.
// Thread-safety: values and pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace spark::comm::oneshot {

// One RC queue pair's end of a link: a device and port, and the RoCE v2 IPv4 GID index (from
// sysfs: it moves between boots, never assume 3).
struct RailSpec {
  std::string device;  // "rocep1s0f0"
  int port = 1;
  int gid_index = 3;
  // The GRH traffic class of its queue pairs (DSCP << 2 | ECN bits): the lossless class a
  // switched fabric's PFC/ECN queue matches (NCCL_IB_TC's value); 0 = best effort.
  int traffic_class = 0;
};
// "rocep1s0f0:3" or "rocep1s0f0:1:3" (device[:port]:gid_index); InvalidArgument otherwise.
Result<RailSpec> ParseRail(const std::string& text);

// Immediate: bits 31-24 source rank (0xFF an abort note, 0xFE goodbye), 23-22 part index,
// 21-20 part count - 1, 19-0 the sequence number's low 20 bits.
inline constexpr int kMaxParts = 4;
inline constexpr uint32_t kImmSeqMask = (1u << 20) - 1;
inline constexpr uint32_t kImmAbort = 0xFFu;
inline constexpr uint32_t kImmBye = 0xFEu;

struct Imm {
  uint32_t source = 0;
  int part = 0;
  int parts = 1;
  uint32_t seq_low = 0;  // data: seq & kImmSeqMask; abort: the note's length
};
uint32_t EncodeImm(const Imm& imm);
Imm DecodeImm(uint32_t value);

// Byte ranges of the parts of a `bytes`-byte slice over `rails` rails: one part below
// `stripe_min`, else one per rail, each a multiple of 64 bytes but the last.
struct Part {
  size_t offset = 0;
  size_t bytes = 0;
};
std::vector<Part> SplitParts(size_t bytes, int rails, size_t stripe_min);

// The full sequence number whose low 20 bits are `low`, given that the slot (parity, source)
// expects `expected` next (the one before it in that slot plus 2). InvalidArgument (naming
// both) when `low` is not the expected call: a lost or reordered write.
Result<uint64_t> RebuildSeq(uint64_t expected, uint32_t low);

// What a rank publishes about one rail of one link.
struct RailEndpoint {
  int peer = -1;  // the rank at the other end of the link
  int rail = 0;
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  int mtu = 0;  // ibv_mtu enum value
  std::array<uint8_t, 16> gid{};
  uint64_t addr = 0;  // the mailbox's address in the owner's memory
  uint32_t rkey = 0;
};
std::string EncodeEndpoints(const std::vector<RailEndpoint>& endpoints);
// InvalidArgument naming the malformed line.
Result<std::vector<RailEndpoint>> DecodeEndpoints(const std::string& text);

}  // namespace spark::comm::oneshot
