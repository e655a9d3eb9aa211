#include "comm/oneshot/verbs_protocol.h"

#include <cinttypes>
#include <cstdio>
#include <sstream>

namespace spark::comm::oneshot {

Result<RailSpec> ParseRail(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string p; std::getline(in, p, ':');) parts.push_back(p);
  auto number = [](const std::string& s, int* out) {
    if (s.empty() || s.size() > 4) return false;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
    }
    *out = std::stoi(s);
    return true;
  };
  RailSpec rail;
  bool ok = (parts.size() == 2 || parts.size() == 3) && !parts[0].empty();
  if (ok) {
    rail.device = parts[0];
    ok = parts.size() == 2 ? number(parts[1], &rail.gid_index)
                           : number(parts[1], &rail.port) && number(parts[2], &rail.gid_index);
  }
  if (!ok || rail.port < 1) {
    return InvalidArgumentError("RDMA rail \"" + text +
                                "\": use DEVICE:GID_INDEX or DEVICE:PORT:GID_INDEX, e.g. "
                                "rocep1s0f0:3");
  }
  return rail;
}

uint32_t EncodeImm(const Imm& imm) {
  return (imm.source & 0xFFu) << 24 | (static_cast<uint32_t>(imm.part) & 3u) << 22 |
         (static_cast<uint32_t>(imm.parts - 1) & 3u) << 20 | (imm.seq_low & kImmSeqMask);
}

Imm DecodeImm(uint32_t value) {
  Imm imm;
  imm.source = value >> 24;
  imm.part = static_cast<int>((value >> 22) & 3u);
  imm.parts = static_cast<int>((value >> 20) & 3u) + 1;
  imm.seq_low = value & kImmSeqMask;
  return imm;
}

std::vector<Part> SplitParts(size_t bytes, int rails, size_t stripe_min) {
  const int n = (rails <= 1 || bytes < stripe_min) ? 1 : std::min(rails, kMaxParts);
  std::vector<Part> parts;
  size_t chunk = (bytes / n + 63) & ~size_t{63};
  size_t offset = 0;
  for (int i = 0; i < n; ++i) {
    const size_t len = i + 1 == n ? bytes - offset : std::min(chunk, bytes - offset);
    parts.push_back({offset, len});
    offset += len;
  }
  return parts;
}

Result<uint64_t> RebuildSeq(uint64_t expected, uint32_t low) {
  if ((expected & kImmSeqMask) != low) {
    return InvalidArgumentError("expected call " + std::to_string(expected) + " (low bits " +
                                std::to_string(expected & kImmSeqMask) + "), got low bits " +
                                std::to_string(low));
  }
  return expected;
}

std::string EncodeEndpoints(const std::vector<RailEndpoint>& endpoints) {
  std::string out;
  for (const RailEndpoint& e : endpoints) {
    char gid[33];
    for (int i = 0; i < 16; ++i) std::snprintf(gid + 2 * i, 3, "%02x", e.gid[i]);
    char line[256];
    std::snprintf(line, sizeof(line), "%d %d %u %u %u %d %s %" PRIu64 " %u\n", e.peer, e.rail,
                  e.qpn, e.psn, static_cast<unsigned>(e.lid), e.mtu, gid, e.addr, e.rkey);
    out += line;
  }
  return out;
}

Result<std::vector<RailEndpoint>> DecodeEndpoints(const std::string& text) {
  std::vector<RailEndpoint> out;
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.empty()) continue;
    RailEndpoint e;
    unsigned lid = 0;
    char gid[64] = {};
    const int got = std::sscanf(line.c_str(), "%d %d %u %u %u %d %40s %" SCNu64 " %u", &e.peer,
                                &e.rail, &e.qpn, &e.psn, &lid, &e.mtu, gid, &e.addr, &e.rkey);
    bool ok = got == 9 && std::string(gid).size() == 32;
    for (int i = 0; ok && i < 16; ++i) {
      unsigned byte = 0;
      ok = std::sscanf(gid + 2 * i, "%2x", &byte) == 1;
      e.gid[i] = static_cast<uint8_t>(byte);
    }
    if (!ok) {
      return InvalidArgumentError("RDMA endpoint line " + std::to_string(n) + " malformed: \"" +
                                  line + "\"");
    }
    e.lid = static_cast<uint16_t>(lid);
    out.push_back(e);
  }
  return out;
}

}  // namespace spark::comm::oneshot
