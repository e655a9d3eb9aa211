// IPv4 addresses and CIDR blocks: parsing, containment, subnetting. Pure value types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace spark::netplan {

struct Ipv4 {
  uint32_t value = 0;  // host byte order

  static std::optional<Ipv4> Parse(std::string_view text);
  std::string ToString() const;
  friend bool operator==(Ipv4 a, Ipv4 b) { return a.value == b.value; }
  friend bool operator<(Ipv4 a, Ipv4 b) { return a.value < b.value; }
};

struct Cidr {
  Ipv4 network;
  int prefix = 32;

  // "198.18.0.0/21". InvalidArgument when malformed or when host bits are set
  // ("198.18.0.1/21 has host bits set; did you mean 198.18.0.0/21?").
  static Result<Cidr> Parse(std::string_view text);
  std::string ToString() const;

  uint64_t size() const { return uint64_t{1} << (32 - prefix); }
  uint32_t mask() const { return prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix); }
  bool Contains(Ipv4 ip) const { return (ip.value & mask()) == network.value; }
  bool Overlaps(const Cidr& other) const;
  // The index-th subnet of the given longer prefix; nullopt when out of range or shorter.
  std::optional<Cidr> Subnet(int new_prefix, uint64_t index) const;
  // The host address at offset `host` (1 = first usable).
  Ipv4 Host(uint32_t host) const { return Ipv4{network.value + host}; }

  friend bool operator==(const Cidr& a, const Cidr& b) {
    return a.network == b.network && a.prefix == b.prefix;
  }
};

// An address configured on an interface: host address plus prefix length ("198.18.0.1/24").
// Unlike Cidr, host bits are the point.
struct InterfaceAddress {
  Ipv4 ip;
  int prefix = 32;

  // InvalidArgument when not "A.B.C.D/N".
  static Result<InterfaceAddress> Parse(std::string_view text);
  std::string ToString() const { return ip.ToString() + "/" + std::to_string(prefix); }
  Cidr Subnet() const;

  friend bool operator==(const InterfaceAddress& a, const InterfaceAddress& b) {
    return a.ip == b.ip && a.prefix == b.prefix;
  }
};

}  // namespace spark::netplan
