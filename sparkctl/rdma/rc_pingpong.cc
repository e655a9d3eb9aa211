// RC queue-pair latency and bandwidth test (see rc_pingpong.h).
#include "sparkctl/rdma/rc_pingpong.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#ifdef SPARK_HAVE_IBVERBS
#include <infiniband/verbs.h>
#endif

namespace spark::rdma {

#ifndef SPARK_HAVE_IBVERBS
Result<RcResult> RunRcTest(bool, const RcOptions& o, const Exchange&) {
  return UnimplementedError(o.device + ": this binary was built without libibverbs (install "
                            "libibverbs-dev and rebuild); no RDMA test possible");
}
#else
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kDepth = 64;
constexpr uint64_t kPingId = 1, kWriteId = 2, kRecvId = 3;

// Owns the verbs objects of one end.
struct Rc {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<char> buf;
  int completed[4] = {0, 0, 0, 0};  // completions seen but not yet awaited, by wr_id
  ~Rc() {
    if (qp) ibv_destroy_qp(qp);
    if (mr) ibv_dereg_mr(mr);
    if (cq) ibv_destroy_cq(cq);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
};

struct Peer {
  uint32_t qpn = 0, psn = 0, rkey = 0;
  uint64_t addr = 0;
  ibv_gid gid{};
  int mtu = 0;
};

std::string Encode(const Peer& p) {
  char buf[160];
  int n = std::snprintf(buf, sizeof(buf), "%u %u %u %" PRIu64 " %d ", p.qpn, p.psn, p.rkey,
                        p.addr, p.mtu);
  for (uint8_t b : p.gid.raw) n += std::snprintf(buf + n, sizeof(buf) - n, "%02x", b);
  return buf;
}

Result<Peer> Decode(const std::string& s) {
  Peer p;
  char gid[40] = {};
  if (std::sscanf(s.c_str(), "%u %u %u %" SCNu64 " %d %32s", &p.qpn, &p.psn, &p.rkey, &p.addr,
                  &p.mtu, gid) != 6 || std::strlen(gid) != 32) {
    return InternalError("malformed RDMA peer record '" + s + "'");
  }
  for (int i = 0; i < 16; ++i) std::sscanf(gid + 2 * i, "%2hhx", &p.gid.raw[i]);
  return p;
}

Status Fail(const RcOptions& o, const char* call) {
  return UnavailableError(o.device + ": " + call + " failed (" + std::strerror(errno) + ")");
}

Status Open(Rc& rc, const RcOptions& o) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  for (int i = 0; list && i < n && !rc.ctx; ++i)
    if (o.device == ibv_get_device_name(list[i])) rc.ctx = ibv_open_device(list[i]);
  if (list) ibv_free_device_list(list);
  if (!rc.ctx) return NotFoundError(o.device + ": no such RDMA device can be opened (ibv_devices)");
  rc.buf.assign(std::max<size_t>(o.size, 64), 0);
  if (!(rc.pd = ibv_alloc_pd(rc.ctx))) return Fail(o, "ibv_alloc_pd");
  rc.mr = ibv_reg_mr(rc.pd, rc.buf.data(), rc.buf.size(),
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!rc.mr) return Fail(o, "ibv_reg_mr (memlock limit? CMA?)");
  if (!(rc.cq = ibv_create_cq(rc.ctx, 4 * kDepth, nullptr, nullptr, 0))) return Fail(o, "ibv_create_cq");
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = rc.cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = kDepth;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  if (!(rc.qp = ibv_create_qp(rc.pd, &qa))) return Fail(o, "ibv_create_qp");
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = o.port;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (ibv_modify_qp(rc.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return Fail(o, "ibv_modify_qp INIT");
  return Status::Ok();
}

Status Connect(Rc& rc, const RcOptions& o, const Peer& me, const Peer& peer) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(std::min(me.mtu, peer.mtu));
  a.dest_qp_num = peer.qpn;
  a.rq_psn = peer.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer.gid;
  a.ah_attr.grh.sgid_index = o.gid_index;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = o.port;
  if (ibv_modify_qp(rc.qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    return Fail(o, "ibv_modify_qp RTR (wrong GID index, or the peer's GID unreachable over this "
                   "cable?)");
  }
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = me.psn;
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(rc.qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
    return Fail(o, "ibv_modify_qp RTS");
  return Status::Ok();
}

Status PostRecv(Rc& rc, const RcOptions& o) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(rc.buf.data()), 8, rc.mr->lkey};
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.wr_id = kRecvId;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return ibv_post_recv(rc.qp, &wr, &bad) ? Fail(o, "ibv_post_recv") : Status::Ok();
}

Status PostSend(Rc& rc, const RcOptions& o, ibv_wr_opcode op, size_t len, const Peer* peer) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(rc.buf.data()), static_cast<uint32_t>(len), rc.mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = op == IBV_WR_SEND ? kPingId : kWriteId;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED | (len <= 64 && op == IBV_WR_SEND ? IBV_SEND_INLINE : 0);
  if (peer) {
    wr.wr.rdma.remote_addr = peer->addr;
    wr.wr.rdma.rkey = peer->rkey;
  }
  return ibv_post_send(rc.qp, &wr, &bad) ? Fail(o, "ibv_post_send") : Status::Ok();
}

// Polls until `want` completions with id `id` arrived; completions of other ids are kept for
// their own Await.
Status Await(Rc& rc, const RcOptions& o, uint64_t id, int want) {
  auto deadline = Clock::now() + std::chrono::seconds(10);
  ibv_wc wc[16];
  int take = std::min(want, rc.completed[id]);
  rc.completed[id] -= take;
  want -= take;
  while (want > 0) {
    int n = ibv_poll_cq(rc.cq, 16, wc);
    if (n < 0) return Fail(o, "ibv_poll_cq");
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        return UnavailableError(o.device + ": work completion failed: " +
                                ibv_wc_status_str(wc[i].status) +
                                " (retry exceeded means the peer does not answer on this cable)");
      }
      if (wc[i].wr_id == id && want > 0) {
        --want;
      } else if (wc[i].wr_id < 4) {
        ++rc.completed[wc[i].wr_id];
      }
    }
    if (Clock::now() > deadline)
      return DeadlineExceededError(o.device + ": no completion within 10 s");
  }
  return Status::Ok();
}

}  // namespace

Result<RcResult> RunRcTest(bool client, const RcOptions& o, const Exchange& exchange) {
  Rc rc;
  SPARK_RETURN_IF_ERROR(Open(rc, o));
  ibv_port_attr pa{};
  if (ibv_query_port(rc.ctx, o.port, &pa)) return Fail(o, "ibv_query_port");
  Peer me;
  me.qpn = rc.qp->qp_num;
  me.psn = static_cast<uint32_t>(Clock::now().time_since_epoch().count()) & 0xffffff;
  me.rkey = rc.mr->rkey;
  me.addr = reinterpret_cast<uintptr_t>(rc.buf.data());
  me.mtu = pa.active_mtu;
  if (ibv_query_gid(rc.ctx, o.port, o.gid_index, &me.gid)) return Fail(o, "ibv_query_gid");
  SPARK_ASSIGN_OR_RETURN(std::string theirs, exchange(Encode(me)));
  SPARK_ASSIGN_OR_RETURN(Peer peer, Decode(theirs));
  SPARK_RETURN_IF_ERROR(Connect(rc, o, me, peer));
  SPARK_RETURN_IF_ERROR(PostRecv(rc, o));
  SPARK_RETURN_IF_ERROR(exchange("ready").status());  // both ends have a receive posted
  RcResult r;
  std::vector<double>& half_rtt = r.half_rtt_us;
  for (int i = 0; i < o.pingpongs; ++i) {
    auto t0 = Clock::now();
    if (client) SPARK_RETURN_IF_ERROR(PostSend(rc, o, IBV_WR_SEND, 8, nullptr));
    SPARK_RETURN_IF_ERROR(Await(rc, o, kRecvId, 1));
    SPARK_RETURN_IF_ERROR(PostRecv(rc, o));
    if (!client) SPARK_RETURN_IF_ERROR(PostSend(rc, o, IBV_WR_SEND, 8, nullptr));
    SPARK_RETURN_IF_ERROR(Await(rc, o, kPingId, 1));
    half_rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2);
  }
  if (client) {
    auto start = Clock::now();
    int in_flight = 0;
    while (Clock::now() - start < o.duration) {
      while (in_flight < kDepth / 2) {
        SPARK_RETURN_IF_ERROR(PostSend(rc, o, IBV_WR_RDMA_WRITE, o.size, &peer));
        ++in_flight;
      }
      SPARK_RETURN_IF_ERROR(Await(rc, o, kWriteId, 1));
      --in_flight;
      r.bytes += o.size;
    }
    SPARK_RETURN_IF_ERROR(Await(rc, o, kWriteId, in_flight));
    r.bytes += in_flight * o.size;
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    r.gbps = r.bytes * 8 / 1e9 / r.seconds;
  }
  SPARK_RETURN_IF_ERROR(exchange("done").status());
  return r;
}
#endif

}  // namespace spark::rdma
