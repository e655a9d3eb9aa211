#include "comm/oneshot/setup.h"

#include <algorithm>

#include "base/logging.h"
#include "comm/oneshot/socket_wire.h"

namespace spark::comm::oneshot {

namespace {

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string part;
  for (char c : text) {
    if (c == sep) {
      out.push_back(part);
      part.clear();
    } else {
      part += c;
    }
  }
  if (!text.empty()) out.push_back(part);
  return out;
}

}  // namespace

std::vector<std::string> ParseAddresses(const std::string& text) { return Split(text, ','); }

Result<std::vector<std::vector<RailSpec>>> ParseRails(const std::string& text) {
  std::vector<std::vector<RailSpec>> links;
  for (const std::string& link : Split(text, ',')) {
    std::vector<RailSpec> rails;
    for (const std::string& rail : Split(link, '+')) {
      SPARK_ASSIGN_OR_RETURN(RailSpec r, ParseRail(rail));
      rails.push_back(r);
    }
    if (rails.empty()) return InvalidArgumentError("RDMA rails \"" + text + "\": an empty link");
    links.push_back(rails);
  }
  return links;
}

Status OneShotSettings::Validate() const {
  if (max_bytes > (size_t{64} << 20)) {
    return InvalidArgumentError("--oneshot-max-bytes " + std::to_string(max_bytes) +
                                ": the one-shot transport carries at most 64 MiB per call");
  }
  if (wire != "socket" && wire != "rdma") {
    return InvalidArgumentError("--oneshot-wire '" + wire + "': use socket or rdma");
  }
  SPARK_RETURN_IF_ERROR(ParseTopology(topology).status());
  if (!rails.empty()) SPARK_RETURN_IF_ERROR(ParseRails(rails).status());
  if (traffic_class < 0 || traffic_class > 255) {
    return InvalidArgumentError("--oneshot-traffic-class " + std::to_string(traffic_class) +
                                ": a traffic class is 0-255 (DSCP << 2 | ECN; 106 for DSCP 26)");
  }
  if (traffic_class != 0 && wire != "rdma") {
    return InvalidArgumentError("--oneshot-traffic-class applies to --oneshot-wire rdma only");
  }
  if (enabled() && wire == "rdma" && rails.empty()) {
    return InvalidArgumentError("--oneshot-wire rdma needs --oneshot-rails (each link's RDMA "
                                "devices and GID index, DEV:GID[+DEV:GID][,...])");
  }
  return Status::Ok();
}

Result<OneShotOptions> OneShotSettings::ToOptions(const std::string& default_address,
                                                  std::chrono::milliseconds timeout) const {
  SPARK_RETURN_IF_ERROR(Validate());
  OneShotOptions o;
  SPARK_ASSIGN_OR_RETURN(o.topology, ParseTopology(topology));
  o.wire = wire;
  o.capacity_bytes = std::max<size_t>(max_bytes, 64);
  o.addresses = ParseAddresses(addresses.empty() ? default_address : addresses);
  if (!rails.empty()) {
    SPARK_ASSIGN_OR_RETURN(o.rails, ParseRails(rails));
  }
  o.traffic_class = traffic_class;
  o.transport.timeout = timeout;
  return o;
}

std::vector<std::string> OneShotSettings::Argv() const {
  if (!enabled()) return {};
  std::vector<std::string> a = {"--oneshot-max-bytes", std::to_string(max_bytes),
                                "--oneshot-wire",      wire,
                                "--oneshot-topology",  topology};
  if (!addresses.empty()) a.insert(a.end(), {"--oneshot-addr", addresses});
  if (!rails.empty()) a.insert(a.end(), {"--oneshot-rails", rails});
  if (traffic_class != 0) {
    a.insert(a.end(), {"--oneshot-traffic-class", std::to_string(traffic_class)});
  }
  return a;
}

Exchange ExchangeOver(Communicator& comm) {
  return [&comm](const std::string& mine) -> Result<std::vector<std::string>> {
    std::vector<std::string> all(comm.world_size());
    for (int r = 0; r < comm.world_size(); ++r) {
      std::vector<uint8_t> bytes;
      if (r == comm.rank()) bytes.assign(mine.begin(), mine.end());
      SPARK_RETURN_IF_ERROR(BroadcastBytes(comm, &bytes, r));
      all[r].assign(bytes.begin(), bytes.end());
    }
    return all;
  };
}

Result<std::unique_ptr<Transport>> ConnectTransport(Communicator& exchange,
                                                    const OneShotOptions& options) {
  if (options.capacity_bytes == 0 || options.capacity_bytes > (size_t{64} << 20)) {
    return InvalidArgumentError("one-shot capacity of " + std::to_string(options.capacity_bytes) +
                                " bytes: use 1 byte to 64 MiB");
  }
  SPARK_ASSIGN_OR_RETURN(RoutePlan route,
                         BuildRoute(exchange.rank(), exchange.world_size(), options.topology));
  const size_t region_bytes = Mailbox::RegionBytes(route.world, options.capacity_bytes);
  SPARK_ASSIGN_OR_RETURN(Region region, options.region ? options.region(region_bytes)
                                                       : HostRegion(region_bytes));
  auto mailbox = std::make_unique<Mailbox>(std::move(region), route.world, options.capacity_bytes);
  std::unique_ptr<Wire> wire;
  Exchange ex = ExchangeOver(exchange);
  if (options.wire == "socket") {
    if (options.addresses.empty()) {
      return InvalidArgumentError("one-shot socket wire: no local address given for its links");
    }
    SPARK_ASSIGN_OR_RETURN(wire, SocketWire::Connect(route, mailbox.get(), options.addresses, ex,
                                                     options.transport.timeout));
  } else if (options.wire == "rdma") {
    std::vector<std::vector<RailSpec>> rails = options.rails;
    for (auto& link : rails) {
      for (RailSpec& r : link) r.traffic_class = options.traffic_class;
    }
    SPARK_ASSIGN_OR_RETURN(wire, VerbsWire::Connect(route, mailbox.get(), rails, ex,
                                                    options.transport.timeout));
    // Every queue pair is ready to receive before anyone writes.
    SPARK_RETURN_IF_ERROR(exchange.Barrier());
  } else {
    return InvalidArgumentError("one-shot wire \"" + options.wire + "\": use socket or rdma");
  }
  Logger("engine.comm")
      ->info("rank {}/{}: one-shot transport over {} ({} topology, {} link(s), up to {} bytes, "
             "at most {} hop(s))",
             route.rank, route.world, wire->name(), TopologyName(route.topology),
             route.link_count(), mailbox->capacity(), route.MaxHops());
  return std::make_unique<Transport>(std::move(route), std::move(mailbox), std::move(wire),
                                     options.transport);
}

}  // namespace spark::comm::oneshot
