#include "sparkctl/host/beacon.h"

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <set>

#include "base/logging.h"
#include "base/strings.h"

namespace spark::host {
namespace {

constexpr char kMagic[] = "SPARKCTL-BEACON/1";

struct Link {
  std::string netdev;
  int fd = -1;
  int ifindex = 0;
  unsigned char mac[6] = {};
};

Status BringUp(int fd, const std::string& netdev) {
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, netdev.c_str(), IFNAMSIZ - 1);
  if (ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) return ErrnoError(errno, netdev + ": SIOCGIFFLAGS");
  if (!(ifr.ifr_flags & IFF_UP)) {
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0) return ErrnoError(errno, netdev + ": bringing it up");
  }
  return Status::Ok();
}

Result<Link> OpenLink(const std::string& netdev) {
  Link link;
  link.netdev = netdev;
  link.ifindex = static_cast<int>(if_nametoindex(netdev.c_str()));
  if (link.ifindex == 0) return NotFoundError(netdev + ": no such network device");
  link.fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(kBeaconEtherType));
  if (link.fd < 0) {
    return ErrnoError(errno, "raw socket for beacons (needs root / CAP_NET_RAW)");
  }
  Status up = BringUp(link.fd, netdev);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, netdev.c_str(), IFNAMSIZ - 1);
  if (up.ok() && ioctl(link.fd, SIOCGIFHWADDR, &ifr) == 0) {
    std::memcpy(link.mac, ifr.ifr_hwaddr.sa_data, 6);
  }
  sockaddr_ll addr{};
  addr.sll_family = AF_PACKET;
  addr.sll_protocol = htons(kBeaconEtherType);
  addr.sll_ifindex = link.ifindex;
  if (!up.ok() || bind(link.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Status s = up.ok() ? ErrnoError(errno, netdev + ": bind") : up;
    close(link.fd);
    return s;
  }
  return link;
}

void Send(const Link& link, const std::string& payload) {
  std::string frame(14, '\0');
  std::memset(frame.data(), 0xff, 6);
  std::memcpy(frame.data() + 6, link.mac, 6);
  frame[12] = static_cast<char>(kBeaconEtherType >> 8);
  frame[13] = static_cast<char>(kBeaconEtherType & 0xff);
  frame += payload;
  if (frame.size() < 60) frame.resize(60, '\0');
  sockaddr_ll to{};
  to.sll_family = AF_PACKET;
  to.sll_ifindex = link.ifindex;
  to.sll_halen = 6;
  std::memset(to.sll_addr, 0xff, 6);
  // A link whose peer is not up yet drops the frame; the next round resends it.
  (void)sendto(link.fd, frame.data(), frame.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to));
}

void Receive(const Link& link, const BeaconIdentity& self, std::set<std::string>* seen,
             BeaconReport* report) {
  char buf[2048];
  while (true) {
    ssize_t n = recv(link.fd, buf, sizeof(buf), 0);
    if (n <= 14) return;
    BeaconSighting s;
    if (!DecodeBeacon(std::string_view(buf + 14, static_cast<size_t>(n - 14)), &s)) continue;
    if (s.peer_machine_id == self.machine_id && s.peer_hostname == self.hostname) continue;
    s.local_netdev = link.netdev;
    std::string key = s.local_netdev + "|" + s.peer_machine_id + "|" + s.peer_hostname + "|" + s.peer_netdev;
    if (seen->insert(key).second) report->sightings.push_back(s);
  }
}

}  // namespace

std::string EncodeBeacon(const BeaconIdentity& self, const std::string& netdev) {
  return std::string(kMagic) + "\n" + self.machine_id + "\n" + self.hostname + "\n" + netdev + "\n";
}

bool DecodeBeacon(std::string_view payload, BeaconSighting* s) {
  std::vector<std::string> lines = Split(payload, '\n');
  if (lines.size() < 4 || lines[0] != kMagic) return false;
  s->peer_machine_id = lines[1];
  s->peer_hostname = lines[2];
  s->peer_netdev = lines[3];
  return !s->peer_hostname.empty() && !s->peer_netdev.empty();
}

Result<BeaconReport> RunBeacons(const BeaconIdentity& self, const std::vector<std::string>& netdevs,
                                std::chrono::milliseconds duration) {
  BeaconReport report;
  report.self = self;
  std::vector<Link> links;
  for (const std::string& netdev : netdevs) {
    auto link = OpenLink(netdev);
    if (link.ok()) {
      report.netdevs_up.push_back(netdev);
      links.push_back(*link);
    } else if (link.status().code() == StatusCode::kNotFound) {
      report.netdevs_missing.push_back(netdev);
    } else {
      for (Link& l : links) close(l.fd);
      return link.status();
    }
  }
  std::set<std::string> seen;
  auto end = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < end) {
    for (const Link& l : links) Send(l, EncodeBeacon(self, l.netdev));
    std::vector<pollfd> fds;
    for (const Link& l : links) fds.push_back({l.fd, POLLIN, 0});
    auto slice_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    while (std::chrono::steady_clock::now() < slice_end && !fds.empty()) {
      int wait = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      slice_end - std::chrono::steady_clock::now()).count());
      if (poll(fds.data(), fds.size(), std::max(wait, 0)) <= 0) break;
      for (size_t i = 0; i < links.size(); ++i) Receive(links[i], self, &seen, &report);
    }
  }
  for (Link& l : links) close(l.fd);
  return report;
}

nlohmann::json ToJson(const BeaconReport& r) {
  nlohmann::json sightings = nlohmann::json::array();
  for (const auto& s : r.sightings) {
    sightings.push_back({{"local_netdev", s.local_netdev},
                         {"peer_machine_id", s.peer_machine_id},
                         {"peer_hostname", s.peer_hostname},
                         {"peer_netdev", s.peer_netdev}});
  }
  return {{"schema", r.schema},
          {"machine_id", r.self.machine_id},
          {"hostname", r.self.hostname},
          {"netdevs_up", r.netdevs_up},
          {"netdevs_missing", r.netdevs_missing},
          {"sightings", sightings}};
}

Result<BeaconReport> BeaconReportFromJson(const nlohmann::json& j) {
  try {
    BeaconReport r;
    r.self.machine_id = j.at("machine_id").get<std::string>();
    r.self.hostname = j.at("hostname").get<std::string>();
    r.netdevs_up = j.at("netdevs_up").get<std::vector<std::string>>();
    r.netdevs_missing = j.at("netdevs_missing").get<std::vector<std::string>>();
    for (const auto& s : j.at("sightings")) {
      r.sightings.push_back({s.at("local_netdev").get<std::string>(),
                             s.at("peer_machine_id").get<std::string>(),
                             s.at("peer_hostname").get<std::string>(),
                             s.at("peer_netdev").get<std::string>()});
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(std::string("malformed beacon report: ") + e.what());
  }
}

}  // namespace spark::host
