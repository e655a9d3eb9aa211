#include "comm/oneshot/verbs_wire.h"

#if SPARK_HAVE_IBVERBS
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#endif

namespace spark::comm::oneshot {

#if SPARK_HAVE_IBVERBS
namespace {

constexpr int kSendDepth = 256;
constexpr int kRecvDepth = 512;
constexpr int kSignalEvery = 32;
constexpr uint64_t kRecvBit = uint64_t{1} << 63;

uint64_t WrId(bool recv, int link, int rail, int count) {
  return (recv ? kRecvBit : 0) | static_cast<uint64_t>(count) << 24 |
         static_cast<uint64_t>(rail) << 16 | static_cast<uint64_t>(link);
}
int WrLink(uint64_t id) { return static_cast<int>(id & 0xFFFF); }
int WrRail(uint64_t id) { return static_cast<int>((id >> 16) & 0xFF); }
int WrCount(uint64_t id) { return static_cast<int>((id >> 24) & 0xFFFF); }

std::string Errno(int rc) { return std::strerror(rc > 0 ? rc : errno); }

// One opened RDMA device: its protection domain, the mailbox registered on it, and one
// completion queue for every queue pair on it.
struct Device {
  std::string name;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_mr* mr = nullptr;
  ibv_cq* cq = nullptr;
};

struct Rail {
  Device* device = nullptr;
  RailSpec spec;
  ibv_qp* qp = nullptr;
  uint32_t psn = 0;
  ibv_port_attr port{};
  ibv_gid gid{};
  RailEndpoint remote;
  std::mutex post_mu;
  int unsignaled = 0;              // under post_mu
  std::atomic<int> in_flight{0};  // posted, not yet reaped
};

struct Link {
  int peer = -1;
  std::vector<std::unique_ptr<Rail>> rails;
  std::atomic<bool> down{false};
  bool bye_seen = false;  // progress thread only
};

}  // namespace

struct VerbsWire::State {
  RoutePlan route;
  Mailbox* mailbox = nullptr;
  WireSink* sink = nullptr;
  std::chrono::milliseconds timeout{0};
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<std::unique_ptr<Link>> links;
  // Reassembly by (parity, source), progress thread only.
  std::vector<uint64_t> expected;
  std::vector<int> parts_seen;
  std::thread progress;
  std::atomic<bool> stop{false};
  bool closed = false;

  ~State();
  Result<Device*> Open(const RailSpec& spec);
  Status CreateQp(Rail& rail, int link, int index);
  Status ToRts(Rail& rail, int link);
  Status PostRecv(Rail& rail, int link, int index);
  // Posts one WRITE (with `imm` unless null) of local [laddr, +len) to the peer's raddr.
  Status Post(int link, int rail_index, uint64_t laddr, uint32_t len, uint64_t raddr,
              const uint32_t* imm);
  void Poll();
  void Handle(const ibv_wc& wc);
  uint64_t RemoteAddr(const Rail& rail, const void* local) const {
    return rail.remote.addr + (static_cast<const uint8_t*>(local) -
                               static_cast<const uint8_t*>(mailbox->base()));
  }
  std::string Where(int link) const {
    const Link& l = *links[link];
    return "rank " + std::to_string(l.peer) + " via " + l.rails[0]->spec.device;
  }
};

VerbsWire::State::~State() {
  stop = true;
  if (progress.joinable()) progress.join();
  for (auto& link : links) {
    for (auto& rail : link->rails) {
      if (rail->qp) ibv_destroy_qp(rail->qp);
    }
  }
  for (auto& d : devices) {
    if (d->cq) ibv_destroy_cq(d->cq);
    if (d->mr) ibv_dereg_mr(d->mr);
    if (d->pd) ibv_dealloc_pd(d->pd);
    if (d->ctx) ibv_close_device(d->ctx);
  }
}

Result<Device*> VerbsWire::State::Open(const RailSpec& spec) {
  for (auto& d : devices) {
    if (d->name == spec.device) return d.get();
  }
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) {
    return UnavailableError("RDMA device " + spec.device + ": ibv_get_device_list: " + Errno(0) +
                            " (no RDMA devices on this machine: is the ConnectX driver loaded "
                            "and /dev/infiniband present?)");
  }
  ibv_device* found = nullptr;
  std::string names;
  for (int i = 0; i < n; ++i) {
    names += (names.empty() ? "" : ", ") + std::string(ibv_get_device_name(list[i]));
    if (spec.device == ibv_get_device_name(list[i])) found = list[i];
  }
  auto d = std::make_unique<Device>();
  d->name = spec.device;
  if (found != nullptr) d->ctx = ibv_open_device(found);
  ibv_free_device_list(list);
  if (found == nullptr) {
    return NotFoundError("RDMA device " + spec.device + " not found (verbs lists: " +
                         (names.empty() ? std::string("none") : names) + ")");
  }
  if (d->ctx == nullptr) return UnavailableError("ibv_open_device " + spec.device + ": " + Errno(0));
  Device* raw = d.get();
  devices.push_back(std::move(d));  // owned from here, so the destructor frees what follows
  raw->pd = ibv_alloc_pd(raw->ctx);
  if (raw->pd == nullptr) return UnavailableError("ibv_alloc_pd " + spec.device + ": " + Errno(0));
  const size_t bytes = Mailbox::RegionBytes(mailbox->world(), mailbox->capacity());
  raw->mr = ibv_reg_mr(raw->pd, mailbox->base(), bytes,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (raw->mr == nullptr) {
    return UnavailableError("ibv_reg_mr of " + std::to_string(bytes) + " bytes on " +
                            spec.device + ": " + Errno(0) +
                            " (ENOMEM: memlock limit or zero CMA, see `sparkctl preflight`)");
  }
  const int cqe = (kSendDepth + kRecvDepth) * 2 * std::max(1, route.link_count());
  raw->cq = ibv_create_cq(raw->ctx, cqe, nullptr, nullptr, 0);
  if (raw->cq == nullptr) return UnavailableError("ibv_create_cq " + spec.device + ": " + Errno(0));
  return raw;
}

Status VerbsWire::State::CreateQp(Rail& rail, int link, int index) {
  const std::string where = rail.spec.device + " (link to rank " +
                            std::to_string(links[link]->peer) + ")";
  if (int rc = ibv_query_port(rail.device->ctx, rail.spec.port, &rail.port); rc != 0) {
    return UnavailableError("ibv_query_port " + where + ": " + Errno(rc));
  }
  if (rail.port.state != IBV_PORT_ACTIVE) {
    return UnavailableError(where + ": port " + std::to_string(rail.spec.port) +
                            " is not ACTIVE: check the cable (`sparkctl selftest`)");
  }
  if (int rc = ibv_query_gid(rail.device->ctx, rail.spec.port, rail.spec.gid_index, &rail.gid);
      rc != 0) {
    return UnavailableError("ibv_query_gid " + where + " index " +
                            std::to_string(rail.spec.gid_index) + ": " + Errno(rc));
  }
  static const ibv_gid kZero{};
  if (std::memcmp(&rail.gid, &kZero, sizeof(kZero)) == 0) {
    return UnavailableError(where + ": GID index " + std::to_string(rail.spec.gid_index) +
                            " is empty: the RoCE v2 IPv4 entry moved (`sparkctl preflight`, "
                            "ROCE.GID_V2_IPV4)");
  }
  ibv_qp_init_attr init{};
  init.send_cq = rail.device->cq;
  init.recv_cq = rail.device->cq;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = kSendDepth;
  init.cap.max_recv_wr = kRecvDepth;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  rail.qp = ibv_create_qp(rail.device->pd, &init);
  if (rail.qp == nullptr) return UnavailableError("ibv_create_qp " + where + ": " + Errno(0));
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<uint8_t>(rail.spec.port);
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  if (int rc = ibv_modify_qp(rail.qp, &a,
                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      rc != 0) {
    return UnavailableError("ibv_modify_qp(INIT) " + where + ": " + Errno(rc));
  }
  std::random_device seed;
  rail.psn = seed() & 0xFFFFFF;
  for (int i = 0; i < kRecvDepth; ++i) SPARK_RETURN_IF_ERROR(PostRecv(rail, link, index));
  return Status::Ok();
}

Status VerbsWire::State::PostRecv(Rail& rail, int link, int index) {
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = WrId(true, link, index, 0);
  wr.num_sge = 0;  // WRITE WITH IMMEDIATE consumes a receive but places its data by address
  if (int rc = ibv_post_recv(rail.qp, &wr, &bad); rc != 0) {
    return UnavailableError("ibv_post_recv " + rail.spec.device + ": " + Errno(rc));
  }
  return Status::Ok();
}

Status VerbsWire::State::ToRts(Rail& rail, int link) {
  const std::string where = rail.spec.device + " (link to rank " +
                            std::to_string(links[link]->peer) + ")";
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(std::min<int>(rail.port.active_mtu, rail.remote.mtu));
  a.dest_qp_num = rail.remote.qpn;
  a.rq_psn = rail.remote.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  std::memcpy(a.ah_attr.grh.dgid.raw, rail.remote.gid.data(), 16);
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(rail.spec.gid_index);
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.grh.traffic_class = static_cast<uint8_t>(rail.spec.traffic_class);
  a.ah_attr.dlid = rail.remote.lid;
  a.ah_attr.port_num = static_cast<uint8_t>(rail.spec.port);
  int rc = ibv_modify_qp(rail.qp, &a,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                             IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc != 0) {
    return UnavailableError("ibv_modify_qp(RTR) " + where + ": " + Errno(rc) +
                            (rc == ETIMEDOUT || errno == ETIMEDOUT
                                 ? " (on a ring: port 0 cabled to port 0? `sparkctl discover`)"
                                 : " (check the GID index and the cable)"));
  }
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;  // 4.096 us * 2^14 = 67 ms per try
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = rail.psn;
  a.max_rd_atomic = 1;
  rc = ibv_modify_qp(rail.qp, &a,
                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                         IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc != 0) return UnavailableError("ibv_modify_qp(RTS) " + where + ": " + Errno(rc));
  return Status::Ok();
}

Status VerbsWire::State::Post(int link, int rail_index, uint64_t laddr, uint32_t len,
                              uint64_t raddr, const uint32_t* imm) {
  Rail& rail = *links[link]->rails[rail_index];
  // Keep the send queue from overflowing: the progress thread reaps signalled completions.
  const auto deadline = Clock::now() + timeout;
  while (rail.in_flight.load(std::memory_order_acquire) >= kSendDepth - 1) {
    if (links[link]->down.load() || Clock::now() > deadline) {
      return UnavailableError("send queue to " + Where(link) + " does not drain");
    }
    std::this_thread::yield();
  }
  std::lock_guard<std::mutex> lock(rail.post_mu);
  ibv_sge sge{};
  sge.addr = laddr;
  sge.length = len;
  sge.lkey = rail.device->mr->lkey;
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  const bool signal = ++rail.unsignaled >= kSignalEvery;
  wr.wr_id = WrId(false, link, rail_index, signal ? rail.unsignaled : 0);
  wr.sg_list = len > 0 ? &sge : nullptr;
  wr.num_sge = len > 0 ? 1 : 0;
  wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  if (imm) wr.imm_data = htonl(*imm);
  wr.send_flags = signal ? IBV_SEND_SIGNALED : 0;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rail.remote.rkey;
  rail.in_flight.fetch_add(1, std::memory_order_acq_rel);
  if (int rc = ibv_post_send(rail.qp, &wr, &bad); rc != 0) {
    rail.in_flight.fetch_sub(1, std::memory_order_acq_rel);
    return UnavailableError("ibv_post_send to " + Where(link) + ": " + Errno(rc));
  }
  if (signal) rail.unsignaled = 0;
  return Status::Ok();
}

void VerbsWire::State::Handle(const ibv_wc& wc) {
  const int link = WrLink(wc.wr_id);
  if (link >= static_cast<int>(links.size())) return;
  Link& l = *links[link];
  if (wc.status != IBV_WC_SUCCESS) {
    if (!l.down.exchange(true) && !stop.load()) {
      sink->OnLinkDown(link,
                       std::string(ibv_wc_status_str(wc.status)) + ", vendor error " +
                           std::to_string(wc.vendor_err),
                       l.bye_seen);
    }
    return;
  }
  if ((wc.wr_id & kRecvBit) == 0) {  // a signalled send: everything posted before it is done
    Rail& rail = *l.rails[WrRail(wc.wr_id)];
    rail.in_flight.fetch_sub(WrCount(wc.wr_id), std::memory_order_acq_rel);
    return;
  }
  Rail& rail = *l.rails[WrRail(wc.wr_id)];
  if (Status s = PostRecv(rail, link, WrRail(wc.wr_id)); !s.ok()) {
    if (!l.down.exchange(true)) sink->OnLinkDown(link, s.message(), false);
    return;
  }
  const Imm imm = DecodeImm(ntohl(wc.imm_data));
  if (imm.source == kImmBye) {
    l.bye_seen = true;
    return;
  }
  if (imm.source == kImmAbort) {
    const size_t len = std::min<size_t>(imm.seq_low, Mailbox::kAbortNoteBytes);
    sink->OnAbort(link, std::string(mailbox->AbortNote(l.peer), len));
    return;
  }
  const int world = route.world;
  if (static_cast<int>(imm.source) >= world) {
    if (!l.down.exchange(true)) sink->OnLinkDown(link, "bad immediate (source out of range)", false);
    return;
  }
  const int index = static_cast<int>(imm.seq_low & 1) * world + static_cast<int>(imm.source);
  if (++parts_seen[index] < imm.parts) return;
  parts_seen[index] = 0;
  Result<uint64_t> seq = RebuildSeq(expected[index], imm.seq_low);
  if (!seq.ok()) {
    if (!l.down.exchange(true)) {
      sink->OnLinkDown(link, "slice of rank " + std::to_string(imm.source) + " out of order: " +
                                 seq.status().message(), false);
    }
    return;
  }
  expected[index] += 2;
  const uint32_t bytes = std::atomic_ref<uint32_t>(mailbox->Sizes()[index]).load();
  sink->OnSlice(link, static_cast<int>(imm.source), *seq, bytes);
}

void VerbsWire::State::Poll() {
  ibv_wc wcs[32];
  int idle = 0;
  while (!stop.load(std::memory_order_acquire)) {
    int got = 0;
    for (auto& d : devices) {
      const int n = ibv_poll_cq(d->cq, 32, wcs);
      for (int i = 0; i < n; ++i) Handle(wcs[i]);
      got += std::max(n, 0);
    }
    // Busy-poll while traffic flows (latency), back off to short sleeps when idle (CPU).
    if (got > 0) {
      idle = 0;
    } else if (++idle > 20000) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

VerbsWire::VerbsWire() : state_(std::make_unique<State>()) {}

VerbsWire::~VerbsWire() { Close(); }

std::string VerbsWire::Describe(int link) const { return state_->Where(link); }

Result<std::unique_ptr<VerbsWire>> VerbsWire::Connect(
    const RoutePlan& route, Mailbox* mailbox, const std::vector<std::vector<RailSpec>>& rails,
    const Exchange& exchange, std::chrono::milliseconds timeout) {
  const int links = route.link_count();
  if (rails.size() != 1 && static_cast<int>(rails.size()) != links) {
    return InvalidArgumentError("one-shot RDMA wire: rails for " + std::to_string(rails.size()) +
                                " links, the route has " + std::to_string(links));
  }
  std::unique_ptr<VerbsWire> w(new VerbsWire());
  State& st = *w->state_;
  st.route = route;
  st.mailbox = mailbox;
  st.timeout = timeout;
  st.expected.resize(2 * route.world);
  st.parts_seen.assign(2 * route.world, 0);
  for (int s = 0; s < route.world; ++s) {
    st.expected[s] = 2;                // parity 0: calls 2, 4, ...
    st.expected[route.world + s] = 1;  // parity 1: calls 1, 3, ...
  }
  std::vector<RailEndpoint> mine;
  for (int l = 0; l < links; ++l) {
    const std::vector<RailSpec>& specs = rails.size() == 1 ? rails[0] : rails[l];
    if (specs.empty() || static_cast<int>(specs.size()) > kMaxParts) {
      return InvalidArgumentError("one-shot RDMA wire: link to rank " +
                                  std::to_string(route.peers[l]) + " needs 1 to " +
                                  std::to_string(kMaxParts) + " rails");
    }
    auto link = std::make_unique<Link>();
    link->peer = route.peers[l];
    st.links.push_back(std::move(link));
    for (int i = 0; i < static_cast<int>(specs.size()); ++i) {
      auto rail = std::make_unique<Rail>();
      rail->spec = specs[i];
      SPARK_ASSIGN_OR_RETURN(rail->device, st.Open(specs[i]));
      SPARK_RETURN_IF_ERROR(st.CreateQp(*rail, l, i));
      RailEndpoint e;
      e.peer = route.peers[l];
      e.rail = i;
      e.qpn = rail->qp->qp_num;
      e.psn = rail->psn;
      e.lid = rail->port.lid;
      e.mtu = rail->port.active_mtu;
      std::memcpy(e.gid.data(), rail->gid.raw, 16);
      e.addr = reinterpret_cast<uint64_t>(mailbox->base());
      e.rkey = rail->device->mr->rkey;
      mine.push_back(e);
      st.links[l]->rails.push_back(std::move(rail));
    }
  }
  SPARK_ASSIGN_OR_RETURN(std::vector<std::string> all, exchange(EncodeEndpoints(mine)));
  for (int l = 0; l < links; ++l) {
    Link& link = *st.links[l];
    SPARK_ASSIGN_OR_RETURN(std::vector<RailEndpoint> theirs, DecodeEndpoints(all[link.peer]));
    for (int i = 0; i < static_cast<int>(link.rails.size()); ++i) {
      bool found = false;
      for (const RailEndpoint& e : theirs) {
        if (e.peer == route.rank && e.rail == i) {
          link.rails[i]->remote = e;
          found = true;
        }
      }
      if (!found) {
        return InvalidArgumentError("one-shot RDMA wire: rank " + std::to_string(link.peer) +
                                    " has no rail " + std::to_string(i) + " to rank " +
                                    std::to_string(route.rank) +
                                    " (both ends of a link need the same number of rails)");
      }
      SPARK_RETURN_IF_ERROR(st.ToRts(*link.rails[i], l));
    }
  }
  return w;
}

void VerbsWire::Start(WireSink* sink) {
  state_->sink = sink;
  state_->progress = std::thread([st = state_.get()] { st->Poll(); });
}

Status VerbsWire::Put(int link, int source, uint64_t seq, uint32_t bytes) {
  State& st = *state_;
  Link& l = *st.links[link];
  if (l.down.load()) return UnavailableError("one-shot link to " + st.Where(link) + " is down");
  const int parity = Mailbox::Parity(seq);
  const int index = parity * st.route.world + source;
  uint32_t* size = &st.mailbox->Sizes()[index];
  if (source == st.route.rank) std::atomic_ref<uint32_t>(*size).store(bytes);
  const uint8_t* slot = st.mailbox->Slot(parity, source);
  const std::vector<Part> parts =
      SplitParts(bytes, static_cast<int>(l.rails.size()), kStripeMinBytes);
  // The size first, on rail 0, before that rail's part: a receive completion on an RC queue
  // pair comes after every earlier write on it is placed.
  Rail& first = *l.rails[0];
  SPARK_RETURN_IF_ERROR(st.Post(link, 0, reinterpret_cast<uint64_t>(size), sizeof(*size),
                                st.RemoteAddr(first, size), nullptr));
  for (int i = 0; i < static_cast<int>(parts.size()); ++i) {
    Rail& rail = *l.rails[i];
    const uint32_t imm = EncodeImm({static_cast<uint32_t>(source), i,
                                    static_cast<int>(parts.size()),
                                    static_cast<uint32_t>(seq & kImmSeqMask)});
    SPARK_RETURN_IF_ERROR(st.Post(link, i, reinterpret_cast<uint64_t>(slot + parts[i].offset),
                                  static_cast<uint32_t>(parts[i].bytes),
                                  st.RemoteAddr(rail, slot + parts[i].offset), &imm));
  }
  return Status::Ok();
}

void VerbsWire::SendAbort(int link, const std::string& note) {
  State& st = *state_;
  if (st.links[link]->down.load()) return;
  char* mine = st.mailbox->AbortNote(st.route.rank);
  const size_t len = std::min(note.size(), Mailbox::kAbortNoteBytes);
  std::memcpy(mine, note.data(), len);
  Rail& rail = *st.links[link]->rails[0];
  const uint32_t imm = EncodeImm({kImmAbort, 0, 1, static_cast<uint32_t>(len)});
  st.Post(link, 0, reinterpret_cast<uint64_t>(mine), static_cast<uint32_t>(len),
          st.RemoteAddr(rail, mine), &imm)
      .IgnoreError();  // best effort: the link may be gone
}

void VerbsWire::Close() {
  State& st = *state_;
  if (st.closed) return;
  st.closed = true;
  const uint32_t imm = EncodeImm({kImmBye, 0, 1, 0});
  for (int l = 0; l < static_cast<int>(st.links.size()); ++l) {
    if (st.links[l]->rails.empty() || st.links[l]->down.load()) continue;
    Rail& rail = *st.links[l]->rails[0];
    st.Post(l, 0, 0, 0, rail.remote.addr, &imm).IgnoreError();
  }
  // Let the goodbyes leave before the queue pairs are destroyed.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  st.stop = true;
  if (st.progress.joinable()) st.progress.join();
}

#else  // !SPARK_HAVE_IBVERBS

struct VerbsWire::State {};

VerbsWire::VerbsWire() = default;
VerbsWire::~VerbsWire() = default;
std::string VerbsWire::Describe(int) const { return "rdma (not built)"; }
void VerbsWire::Start(WireSink*) {}
Status VerbsWire::Put(int, int, uint64_t, uint32_t) {
  return UnimplementedError("built without libibverbs");
}
void VerbsWire::SendAbort(int, const std::string&) {}
void VerbsWire::Close() {}

Result<std::unique_ptr<VerbsWire>> VerbsWire::Connect(const RoutePlan&, Mailbox*,
                                                      const std::vector<std::vector<RailSpec>>&,
                                                      const Exchange&, std::chrono::milliseconds) {
  return UnimplementedError(
      "the one-shot RDMA wire needs libibverbs at build time (install libibverbs-dev and "
      "rebuild), or use the socket wire");
}

#endif

}  // namespace spark::comm::oneshot
