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
#include <fstream>
#include <map>
#include <set>

#include "base/logging.h"
#include "base/strings.h"

namespace spark::host {
namespace {

constexpr char kMagic[] = "SPARKCTL-BEACON/1";

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kSendInterval{100};

struct Link {
  std::string netdev;
  int fd = -1;
  int ifindex = 0;
  unsigned char mac[6] = {};
  bool was_up = false;  // admin-up before this run (else its carrier may still be training)
};

bool HasCarrier(const std::string& netdev) {
  std::ifstream in("/sys/class/net/" + netdev + "/carrier");
  char c = '0';
  return in.get(c) && c == '1';
}

Status BringUp(int fd, const std::string& netdev, bool* was_up) {
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, netdev.c_str(), IFNAMSIZ - 1);
  if (ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) return ErrnoError(errno, netdev + ": SIOCGIFFLAGS");
  *was_up = (ifr.ifr_flags & IFF_UP) != 0;
  if (!*was_up) {
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
  // Protocol 0 until bind: a socket opened for the beacon type would queue every interface's
  // beacons until it is bound, and a twin's frame taken for its sibling's reads as crossed twins.
  link.fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (link.fd < 0) {
    return ErrnoError(errno, "raw socket for beacons (needs root / CAP_NET_RAW)");
  }
  Status up = BringUp(link.fd, netdev, &link.was_up);
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
    sockaddr_ll from{};
    socklen_t from_len = sizeof(from);
    ssize_t n =
        recvfrom(link.fd, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n <= 14) return;
    if (from.sll_ifindex != link.ifindex) continue;  // only what this netdev heard
    BeaconSighting s;
    if (!DecodeBeacon(std::string_view(buf + 14, static_cast<size_t>(n - 14)), &s)) continue;
    if (s.peer_machine_id == self.machine_id && s.peer_hostname == self.hostname) continue;
    s.local_netdev = link.netdev;
    std::string key = s.local_netdev + "|" + s.peer_machine_id + "|" + s.peer_hostname + "|" + s.peer_netdev;
    if (seen->insert(key).second) report->sightings.push_back(s);
  }
}

}  // namespace

BeaconIdentity LocalBeaconIdentity() {
  auto first_line = [](const char* path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return std::string(Trim(line));
  };
  return {first_line("/etc/machine-id"), first_line("/proc/sys/kernel/hostname")};
}

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
                                std::chrono::milliseconds duration, int expected_peers) {
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
  const Clock::time_point start = Clock::now();
  const Clock::time_point end = start + duration;
  Clock::time_point last_new_peer = start;
  size_t peers_before = 0;
  while (Clock::now() < end) {
    for (const Link& l : links) Send(l, EncodeBeacon(self, l.netdev));
    std::vector<pollfd> fds;
    for (const Link& l : links) fds.push_back({l.fd, POLLIN, 0});
    auto slice_end = Clock::now() + kSendInterval;
    while (Clock::now() < slice_end && !fds.empty()) {
      int wait = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      slice_end - Clock::now()).count());
      if (poll(fds.data(), fds.size(), std::max(wait, 0)) <= 0) break;
      for (size_t i = 0; i < links.size(); ++i) Receive(links[i], self, &seen, &report);
    }
    if (expected_peers <= 0) continue;
    // Early stop: a link that was already up and has no carrier (an unplugged cable) is not
    // waited for; one we just brought up may still be training, so it is.
    BeaconProgress p;
    p.expected_peers = expected_peers;
    std::map<std::string, std::set<std::string>> peers_by_link;
    std::set<std::string> peers;
    for (const BeaconSighting& s : report.sightings) {
      std::string peer = s.peer_machine_id + "|" + s.peer_hostname;
      peers_by_link[s.local_netdev].insert(peer);
      peers.insert(peer);
    }
    for (const Link& l : links) {
      auto heard = peers_by_link.find(l.netdev);
      if (heard != peers_by_link.end()) {
        ++p.links_waited;
        ++p.links_heard;
        p.max_peers_on_link = std::max(p.max_peers_on_link, static_cast<int>(heard->second.size()));
      } else if (!l.was_up || HasCarrier(l.netdev)) {
        ++p.links_waited;
      }
    }
    p.peers_heard = static_cast<int>(peers.size());
    const Clock::time_point now = Clock::now();
    if (peers.size() != peers_before) last_new_peer = now;
    peers_before = peers.size();
    p.since_last_new_peer =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - last_new_peer);
    if (BeaconCanStop(p)) break;
  }
  for (Link& l : links) close(l.fd);
  return report;
}

bool BeaconCanStop(const BeaconProgress& p) {
  if (p.expected_peers <= 0 || p.links_waited == 0 || p.links_heard < p.links_waited) return false;
  if (p.since_last_new_peer < 2 * kSendInterval) return false;
  if (p.peers_heard >= p.expected_peers) return true;
  return p.max_peers_on_link == 1 && p.peers_heard >= 2;
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
