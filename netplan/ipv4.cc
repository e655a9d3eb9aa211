#include "netplan/ipv4.h"

#include "base/strings.h"

namespace spark::netplan {

std::optional<Ipv4> Ipv4::Parse(std::string_view text) {
  std::vector<std::string> parts = Split(text, '.');
  if (parts.size() != 4) return std::nullopt;
  uint32_t value = 0;
  for (const auto& p : parts) {
    if (p.empty() || p.size() > 3) return std::nullopt;
    auto octet = ParseInt(p);
    if (!octet || *octet < 0 || *octet > 255) return std::nullopt;
    value = (value << 8) | static_cast<uint32_t>(*octet);
  }
  return Ipv4{value};
}

std::string Ipv4::ToString() const {
  return std::to_string(value >> 24) + "." + std::to_string((value >> 16) & 255) + "." +
         std::to_string((value >> 8) & 255) + "." + std::to_string(value & 255);
}

Result<Cidr> Cidr::Parse(std::string_view text) {
  size_t slash = text.find('/');
  if (slash == std::string_view::npos) {
    return InvalidArgumentError("'" + std::string(text) + "' is not a CIDR block (expected A.B.C.D/N)");
  }
  auto ip = Ipv4::Parse(text.substr(0, slash));
  auto prefix = ParseInt(text.substr(slash + 1));
  if (!ip || !prefix || *prefix < 0 || *prefix > 32) {
    return InvalidArgumentError("'" + std::string(text) + "' is not a CIDR block (expected A.B.C.D/N)");
  }
  Cidr cidr{*ip, static_cast<int>(*prefix)};
  if ((ip->value & cidr.mask()) != ip->value) {
    Cidr fixed{Ipv4{ip->value & cidr.mask()}, cidr.prefix};
    return InvalidArgumentError("'" + std::string(text) + "' has host bits set; did you mean " +
                                fixed.ToString() + "?");
  }
  return cidr;
}

std::string Cidr::ToString() const { return network.ToString() + "/" + std::to_string(prefix); }

bool Cidr::Overlaps(const Cidr& other) const {
  const Cidr& wider = prefix <= other.prefix ? *this : other;
  const Cidr& narrower = prefix <= other.prefix ? other : *this;
  return wider.Contains(narrower.network);
}

std::optional<Cidr> Cidr::Subnet(int new_prefix, uint64_t index) const {
  if (new_prefix < prefix || new_prefix > 32) return std::nullopt;
  uint64_t count = uint64_t{1} << (new_prefix - prefix);
  if (index >= count) return std::nullopt;
  uint64_t step = uint64_t{1} << (32 - new_prefix);
  return Cidr{Ipv4{static_cast<uint32_t>(network.value + index * step)}, new_prefix};
}

Result<InterfaceAddress> InterfaceAddress::Parse(std::string_view text) {
  size_t slash = text.find('/');
  auto ip = Ipv4::Parse(text.substr(0, slash));
  auto prefix = slash == std::string_view::npos ? std::nullopt : ParseInt(text.substr(slash + 1));
  if (!ip || !prefix || *prefix < 0 || *prefix > 32) {
    return InvalidArgumentError("'" + std::string(text) +
                                "' is not an interface address (expected A.B.C.D/N)");
  }
  return InterfaceAddress{*ip, static_cast<int>(*prefix)};
}

Cidr InterfaceAddress::Subnet() const {
  Cidr cidr{ip, prefix};
  cidr.network.value &= cidr.mask();
  return cidr;
}

}  // namespace spark::netplan
