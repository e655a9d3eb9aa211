// One rank of a collective benchmark (see collective_rank.h).
#include "sparkctl/bench/collective_rank.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "comm/communicator.h"
#include "comm/oneshot/oneshot_communicator.h"
#include "comm/rendezvous.h"
#if defined(SPARK_HAVE_NCCL) || defined(SPARK_HAVE_ONESHOT_CUDA)
#include <cuda_runtime.h>
#endif
#ifdef SPARK_HAVE_NCCL
#include "comm/nccl_communicator.h"
#endif
#ifdef SPARK_HAVE_ONESHOT_CUDA
#include "comm/oneshot_cuda/staged_group.h"
#endif

namespace spark::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Gloo or the one-shot transport: host memory; Start runs the collective to completion (both
// block).
class HostBackend : public CollectiveBackend {
 public:
  HostBackend(std::string name, std::unique_ptr<comm::Communicator> c)
      : name_(std::move(name)), comm_(std::move(c)) {}
  std::string name() const override { return name_; }
  int rank() const override { return comm_->rank(); }
  int world_size() const override { return comm_->world_size(); }
  Status Allocate(size_t send_count, size_t recv_count) override {
    send_.assign(send_count, 0.f);
    recv_.assign(recv_count, 0.f);
    return Status::Ok();
  }
  float* send() override { return send_.data(); }
  float* recv() override { return recv_.data(); }
  Status Upload(const float* host, float* dst, size_t count) override {
    std::memcpy(dst, host, count * sizeof(float));
    return Status::Ok();
  }
  Status Download(const float* src, float* host, size_t count) override {
    std::memcpy(host, src, count * sizeof(float));
    return Status::Ok();
  }
  Status Start(Collective c, const float* send, float* recv, size_t count) override {
    if (c == Collective::kAllGather) return comm_->AllGather(send, count, recv);
    // Gloo and the one-shot transport reduce in place: out-of-place is a copy into the receive
  // buffer first.
    if (send != recv) std::memcpy(recv, send, count * sizeof(float));
    return comm_->AllReduceSum(recv, count);
  }
  Status Wait() override { return Status::Ok(); }
  Status Barrier() override { return comm_->Barrier(); }

 private:
  const std::string name_;
  std::unique_ptr<comm::Communicator> comm_;
  std::vector<float> send_, recv_;
};

#if defined(SPARK_HAVE_NCCL) || defined(SPARK_HAVE_ONESHOT_CUDA)
// The device-memory half of a GPU backend: send and receive buffers on the rank's GPU, copies to
// and from the host, CUDA errors named with the rank.
class DeviceBuffersBackend : public CollectiveBackend {
 public:
  ~DeviceBuffersBackend() override {
    if (send_) cudaFree(send_);
    if (recv_) cudaFree(recv_);
  }
  Status Allocate(size_t send_count, size_t recv_count) override {
    SPARK_RETURN_IF_ERROR(Check(cudaMalloc(reinterpret_cast<void**>(&send_),
                                           std::max<size_t>(send_count, 1) * sizeof(float)),
                                "cudaMalloc send"));
    return Check(cudaMalloc(reinterpret_cast<void**>(&recv_),
                            std::max<size_t>(recv_count, 1) * sizeof(float)),
                 "cudaMalloc recv");
  }
  float* send() override { return send_; }
  float* recv() override { return recv_; }
  // The collectives run on non-blocking streams, which do not wait for the legacy stream, and a
  // copy from pageable memory may return before its DMA lands: wait for it here.
  Status Upload(const float* host, float* dst, size_t count) override {
    SPARK_RETURN_IF_ERROR(
        Check(cudaMemcpy(dst, host, count * sizeof(float), cudaMemcpyHostToDevice), "upload"));
    return Check(cudaDeviceSynchronize(), "upload sync");
  }
  Status Download(const float* src, float* host, size_t count) override {
    return Check(cudaMemcpy(host, src, count * sizeof(float), cudaMemcpyDeviceToHost),
                 "download");
  }

 protected:
  Status Check(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return Status::Ok();
    return InternalError("rank " + std::to_string(rank()) + ": " + what + ": " +
                         cudaGetErrorString(e));
  }

 private:
  float* send_ = nullptr;
  float* recv_ = nullptr;
};
#endif

#ifdef SPARK_HAVE_NCCL
// NCCL: device memory on the rank's GPU; Start enqueues on the communicator's stream.
class NcclBackend : public DeviceBuffersBackend {
 public:
  explicit NcclBackend(std::unique_ptr<comm::NcclCommunicator> c) : comm_(std::move(c)) {}
  std::string name() const override { return "nccl"; }
  int rank() const override { return comm_->rank(); }
  int world_size() const override { return comm_->world_size(); }
  Status Start(Collective c, const float* send, float* recv, size_t count) override {
    return c == Collective::kAllReduce ? comm_->EnqueueAllReduceSum(send, recv, count)
                                       : comm_->EnqueueAllGather(send, recv, count);
  }
  Status Wait() override { return comm_->Synchronize(); }
  Status Barrier() override { return comm_->Barrier(); }

 private:
  std::unique_ptr<comm::NcclCommunicator> comm_;
};
#endif

#ifdef SPARK_HAVE_ONESHOT_CUDA
// The one-shot transport on GPU memory: staged through pinned host memory by its kernel, on
// this rank's stream; Gloo (host) sets it up and runs the barriers.
class StagedBackend : public DeviceBuffersBackend {
 public:
  StagedBackend(std::unique_ptr<comm::Communicator> gloo,
                std::unique_ptr<comm::oneshot::StagedOneShot> oneshot, int device)
      : gloo_(std::move(gloo)), oneshot_(std::move(oneshot)) {
    cudaSetDevice(device);
    cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
  }
  ~StagedBackend() override {
    oneshot_.reset();
    if (stream_) cudaStreamDestroy(stream_);
  }
  std::string name() const override { return "oneshot"; }
  int rank() const override { return gloo_->rank(); }
  int world_size() const override { return gloo_->world_size(); }
  Status Start(Collective c, const float* send, float* recv, size_t count) override {
    if (c == Collective::kAllGather) return oneshot_->EnqueueAllGather(send, count, recv, stream_);
    if (send != recv) {
      SPARK_RETURN_IF_ERROR(Check(cudaMemcpyAsync(recv, send, count * sizeof(float),
                                                  cudaMemcpyDeviceToDevice, stream_),
                                  "copy"));
    }
    return oneshot_->EnqueueAllReduceSum(recv, count, stream_);
  }
  Status Wait() override {
    const cudaError_t e = cudaStreamSynchronize(stream_);
    SPARK_RETURN_IF_ERROR(oneshot_->broken());
    return Check(e, "cudaStreamSynchronize");
  }
  Status Barrier() override { return gloo_->Barrier(); }

 private:
  std::unique_ptr<comm::Communicator> gloo_;
  std::unique_ptr<comm::oneshot::StagedOneShot> oneshot_;
  cudaStream_t stream_ = nullptr;
};
#endif

// Fills the buffers of one group with repetition `rep` data; returns the expected result.
struct Group {
  Collective c;
  CollectiveSizes sizes;
  bool in_place;
  const float* send;
  float* recv;
};

Group MakeGroup(const CollectiveOptions& o, CollectiveBackend& b, size_t bytes, bool in_place) {
  Group g{o.collective, SizesFor(o.collective, bytes, sizeof(float), b.world_size()), in_place,
          b.send(), b.recv()};
  if (in_place) g.send = b.recv() + g.sizes.send_inplace_offset * b.rank();
  return g;
}

Status InitGroup(CollectiveBackend& b, const Group& g, int rep) {
  std::vector<float> host(g.sizes.recv_count, -1.f);
  std::vector<float> mine(g.sizes.send_count);
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = BenchValue(b.rank(), i, rep);
  SPARK_RETURN_IF_ERROR(b.Upload(host.data(), b.recv(), host.size()));
  return b.Upload(mine.data(), const_cast<float*>(g.send), mine.size());
}

Result<int64_t> CountWrong(CollectiveBackend& b, const Group& g, int rep) {
  std::vector<float> got(g.sizes.recv_count);
  SPARK_RETURN_IF_ERROR(b.Download(b.recv(), got.data(), got.size()));
  int64_t wrong = 0;
  int n = b.world_size();
  for (size_t i = 0; i < got.size(); ++i) {
    float want = 0;
    if (g.c == Collective::kAllReduce) {
      for (int r = 0; r < n; ++r) want += BenchValue(r, i, rep);
    } else {
      size_t share = g.sizes.send_count;
      want = BenchValue(static_cast<int>(i / share), i % share, rep);
    }
    wrong += got[i] != want;
  }
  return wrong;
}

struct GroupResult {
  double seconds = 0;
  int64_t wrong = -1;
};

Result<GroupResult> TimeGroup(const CollectiveOptions& o, CollectiveBackend& b, const Group& g,
                              int rep) {
  size_t count = g.sizes.param_count;
  if (o.check) SPARK_RETURN_IF_ERROR(InitGroup(b, g, 99));
  SPARK_RETURN_IF_ERROR(b.Start(g.c, g.send, g.recv, count));
  SPARK_RETURN_IF_ERROR(b.Wait());
  SPARK_RETURN_IF_ERROR(b.Barrier());
  auto t0 = Clock::now();
  for (int i = 0; i < o.iters; ++i) SPARK_RETURN_IF_ERROR(b.Start(g.c, g.send, g.recv, count));
  SPARK_RETURN_IF_ERROR(b.Wait());
  GroupResult r;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count() / o.iters;
  SPARK_RETURN_IF_ERROR(b.Barrier());
  if (o.check) {
    SPARK_RETURN_IF_ERROR(InitGroup(b, g, rep));
    SPARK_RETURN_IF_ERROR(b.Start(g.c, g.send, g.recv, count));
    SPARK_RETURN_IF_ERROR(b.Wait());
    SPARK_ASSIGN_OR_RETURN(r.wrong, CountWrong(b, g, rep));
  }
  return r;
}

std::string Key(size_t size_index, bool in_place, int rank) {
  return "bench/" + std::to_string(size_index) + "/" + (in_place ? "in" : "out") + "/" +
         std::to_string(rank);
}

// Rank 0: the measurement of a group over all ranks (time averaged, wrong summed).
Result<Measurement> Gather(const ReportChannel& ch, const CollectiveOptions& o, size_t index,
                           bool in_place, const CollectiveSizes& sizes, int n) {
  Measurement m;
  m.wrong = o.check ? 0 : -1;
  double seconds = 0;
  for (int r = 0; r < n; ++r) {
    SPARK_ASSIGN_OR_RETURN(std::string v, ch.get(Key(index, in_place, r)));
    double s = 0;
    long long w = 0;
    if (std::sscanf(v.c_str(), "%lf %lld", &s, &w) != 2)
      return InternalError("rank " + std::to_string(r) + " sent a malformed result '" + v + "'");
    seconds += s / n;
    if (o.check) m.wrong += w;
  }
  m.time_us = seconds * 1e6;
  m.bw = ComputeBandwidth(o.collective, sizes.param_count, sizeof(float), seconds, n);
  return m;
}

}  // namespace

float BenchValue(int rank, size_t i, int rep) {
  return static_cast<float>(((rank + 1) * 7 + 3 * (i % 61) + rep) % 61);
}

Result<int64_t> RunSweep(const CollectiveOptions& o, CollectiveBackend& b,
                         const ReportChannel& ch, const std::vector<std::string>& device_lines,
                         int nccl_headers, int nccl_library, std::FILE* out) {
  const int n = b.world_size();
  std::vector<size_t> sizes = SizeSweep(o.min_bytes, o.max_bytes, o.step_factor, o.step_bytes);
  CollectiveSizes biggest = SizesFor(o.collective, o.max_bytes, sizeof(float), n);
  SPARK_RETURN_IF_ERROR(b.Allocate(biggest.send_count, biggest.recv_count));
  ReportConfig config{o.collective, b.name(), nccl_headers, nccl_library, n, o.min_bytes,
                      o.max_bytes, o.step_factor, o.step_bytes, o.warmup_iters, o.iters, o.check,
                      device_lines};
  if (b.name() == "oneshot") {
    config.note = std::string("CPU ranks, ") + (o.oneshot_wire == "rdma" ? "RDMA verbs" : "TCP");
  }
  if (b.rank() == 0 && !o.json) std::fputs(ReportHeader(config).c_str(), out);
  std::fflush(out);
  SPARK_RETURN_IF_ERROR(b.Barrier());
  for (size_t s = o.min_bytes; s <= o.max_bytes && s > 0; s *= 2) {  // warm-up, as nccl-tests
    Group g = MakeGroup(o, b, s, false);
    for (int w = 0; w < o.warmup_iters; ++w)
      SPARK_RETURN_IF_ERROR(b.Start(g.c, g.send, g.recv, g.sizes.param_count));
    SPARK_RETURN_IF_ERROR(b.Wait());
  }
  std::vector<ReportRow> rows;
  int rep = 0;
  for (size_t idx = 0; idx < sizes.size(); ++idx) {
    for (bool in_place : {false, true}) {
      Group g = MakeGroup(o, b, sizes[idx], in_place);
      SPARK_ASSIGN_OR_RETURN(GroupResult r, TimeGroup(o, b, g, ++rep));
      char value[64];
      std::snprintf(value, sizeof(value), "%.9e %lld", r.seconds, static_cast<long long>(r.wrong));
      SPARK_RETURN_IF_ERROR(ch.set(Key(idx, in_place, b.rank()), value));
    }
    if (b.rank() != 0) continue;
    CollectiveSizes cs = SizesFor(o.collective, sizes[idx], sizeof(float), n);
    ReportRow row{cs.report_bytes, cs.param_count, "float",
                  o.collective == Collective::kAllReduce ? "sum" : "none", -1, {}, {}};
    SPARK_ASSIGN_OR_RETURN(row.out_of_place, Gather(ch, o, idx, false, cs, n));
    SPARK_ASSIGN_OR_RETURN(row.in_place, Gather(ch, o, idx, true, cs, n));
    rows.push_back(row);
    if (!o.json) std::fputs(ReportRowLine(row).c_str(), out);
    std::fflush(out);
  }
  SPARK_RETURN_IF_ERROR(b.Barrier());  // rank 0 has read every result before the store goes
  if (b.rank() != 0) return int64_t{0};
  if (o.json) {
    std::fprintf(out, "%s\n", ReportJson(config, rows).dump(2).c_str());
  } else {
    std::fputs(ReportFooter(config, rows).c_str(), out);
  }
  std::fflush(out);
  int64_t wrong = 0;
  for (const ReportRow& r : rows) wrong += std::max<int64_t>(0, r.out_of_place.wrong) +
                                           std::max<int64_t>(0, r.in_place.wrong);
  return wrong;
}

namespace {

std::string HostName() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

bool HaveGpu() {
#ifdef SPARK_HAVE_NCCL
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
#else
  return false;
#endif
}

// The device line of this rank for the header.
std::string ThisDevice(const std::string& backend, const CollectiveOptions& o,
                       const RankPlacement& p, const std::string& host) {
#ifdef SPARK_HAVE_NCCL
  if (backend == "nccl") {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, p.device);
    char what[300];
    std::snprintf(what, sizeof(what), "[%04x:%02x:%02x] %s", prop.pciDomainID, prop.pciBusID,
                  prop.pciDeviceID, prop.name);
    return DeviceLine(p.rank, getpid(), host, std::to_string(p.device), what);
  }
#endif
  if (backend == "oneshot") {
#ifdef SPARK_HAVE_ONESHOT_CUDA
    if (HaveGpu()) {
      int devices = 1;
      cudaGetDeviceCount(&devices);
      const int device = p.device % std::max(devices, 1);
      cudaDeviceProp prop{};
      cudaGetDeviceProperties(&prop, device);
      return DeviceLine(p.rank, getpid(), host, std::to_string(device),
                        std::string(prop.name) + " oneshot over " + o.oneshot_wire +
                            ", staged through pinned host memory");
    }
#endif
    return DeviceLine(p.rank, getpid(), host, "-",
                      "[cpu] oneshot over " + o.oneshot_wire + " (" +
                          (p.oneshot_topology.empty() ? o.oneshot_topology : p.oneshot_topology) +
                          ")");
  }
  return DeviceLine(p.rank, getpid(), host, "-", "[cpu] " + backend + " over TCP");
}

Result<std::unique_ptr<CollectiveBackend>> MakeBackend(const std::string& backend,
                                                       const CollectiveOptions& o,
                                                       const RankPlacement& p,
                                                       comm::Rendezvous& rdv) {
  if (backend == "nccl") {
#ifdef SPARK_HAVE_NCCL
    SPARK_ASSIGN_OR_RETURN(auto c, comm::NcclCommunicator::Create(rdv, p.device, "nccl",
                                                                  o.timeout));
    return std::unique_ptr<CollectiveBackend>(new NcclBackend(std::move(c)));
#else
    (void)rdv;
    return FailedPreconditionError("this spark-bench was built without CUDA/NCCL: use --backend "
                                   "gloo, or rebuild on a machine with the CUDA toolkit");
#endif
  }
  comm::CommOptions co;
  co.backend = "gloo";
  co.rank = p.rank;
  co.world_size = p.world_size;
  co.master_addr = p.master_addr;
  co.master_port = p.master_port + 1;
  co.timeout = o.timeout;
  SPARK_ASSIGN_OR_RETURN(auto c, comm::CreateCommunicator(co));
  if (backend != "oneshot") {
    return std::unique_ptr<CollectiveBackend>(new HostBackend("gloo", std::move(c)));
  }
  // Gloo sets the links up and runs the barriers; every size of the sweep goes one-shot.
  comm::oneshot::OneShotOptions oo;
  SPARK_ASSIGN_OR_RETURN(
      oo.topology, comm::oneshot::ParseTopology(p.oneshot_topology.empty() ? o.oneshot_topology
                                                                            : p.oneshot_topology));
  oo.wire = o.oneshot_wire;
  oo.capacity_bytes =
      std::max<size_t>(SizesFor(o.collective, o.max_bytes, sizeof(float), p.world_size).send_count *
                           sizeof(float),
                       64);
  oo.addresses = comm::oneshot::ParseAddresses(p.oneshot_addresses.empty() ? "127.0.0.1"
                                                                          : p.oneshot_addresses);
  if (!p.oneshot_rails.empty()) {
    SPARK_ASSIGN_OR_RETURN(oo.rails, comm::oneshot::ParseRails(p.oneshot_rails));
  } else if (oo.wire == "rdma") {
    return InvalidArgumentError("--oneshot-wire rdma needs --oneshot-rails (the RDMA device and "
                                "GID index of each link)");
  }
  oo.transport.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(o.timeout);
#ifdef SPARK_HAVE_ONESHOT_CUDA
  if (HaveGpu()) {  // GPU memory, as the engine's device all-reduces
    int devices = 1;
    cudaGetDeviceCount(&devices);
    const int device = p.device % std::max(devices, 1);  // ranks may share one GPU
    SPARK_ASSIGN_OR_RETURN(auto staged, comm::oneshot::StagedOneShot::Create(*c, device, oo));
    return std::unique_ptr<CollectiveBackend>(
        new StagedBackend(std::move(c), std::move(staged), device));
  }
#endif
  SPARK_ASSIGN_OR_RETURN(auto one, comm::oneshot::OneShotCommunicator::Create(std::move(c), oo));
  return std::unique_ptr<CollectiveBackend>(new HostBackend("oneshot", std::move(one)));
}

Result<int64_t> RunRank(const CollectiveOptions& o, const RankPlacement& p) {
  comm::RendezvousOptions ro{p.rank, p.world_size, p.master_addr, p.master_port, o.timeout};
  SPARK_ASSIGN_OR_RETURN(auto rdv, comm::Rendezvous::Connect(ro));
  // Rank 0 chooses the backend for everyone, so a mixed cluster fails here, not in a hang.
  std::string backend = o.backend;
  if (p.rank == 0) {
    if (backend == "auto") backend = HaveGpu() ? "nccl" : "gloo";
    SPARK_RETURN_IF_ERROR(rdv->Set("bench/backend", {backend.begin(), backend.end()}));
  } else {
    SPARK_ASSIGN_OR_RETURN(auto v, rdv->Get("bench/backend", o.timeout));
    backend.assign(v.begin(), v.end());
  }
  std::string host = p.host_label.empty() ? HostName() : p.host_label;
  SPARK_ASSIGN_OR_RETURN(std::vector<std::string> lines,
                         rdv->Join("bench", ThisDevice(backend, o, p, host)));
  SPARK_ASSIGN_OR_RETURN(auto b, MakeBackend(backend, o, p, *rdv));
  ReportChannel ch;
  ch.set = [&](const std::string& k, const std::string& v) {
    return rdv->Set(k, std::vector<char>(v.begin(), v.end()));
  };
  ch.get = [&](const std::string& k) -> Result<std::string> {
    SPARK_ASSIGN_OR_RETURN(auto v, rdv->Get(k, o.timeout));
    return std::string(v.begin(), v.end());
  };
  int headers = 0, library = 0;
#ifdef SPARK_HAVE_NCCL
  headers = comm::NcclCommunicator::HeaderVersion();
  library = comm::NcclCommunicator::LibraryVersion();
#endif
  return RunSweep(o, *b, ch, lines, headers, library, stdout);
}

}  // namespace

int RunCollectiveRank(const CollectiveOptions& options, const RankPlacement& placement) {
  Result<int64_t> wrong = RunRank(options, placement);
  if (!wrong.ok()) {
    std::fprintf(stderr, "spark-bench: rank %d: %s\n", placement.rank,
                 wrong.status().message().c_str());
    return 2;
  }
  return *wrong == 0 ? 0 : 2;
}

}  // namespace spark::bench
