#include "engine/backend/cuda/peer_all_reduce_group.h"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"

namespace spark::engine::backend::cuda {
namespace {

// What a rank tells the others about its region.
struct Endpoint {
  char host[64] = {};
  char boot_id[40] = {};
  char pci_bus[32] = {};
  int32_t pid = 0;
  int32_t device = 0;
  int32_t ok = 0;
  uint64_t pointer = 0;
  cudaIpcMemHandle_t handle = {};
  char error[160] = {};
};

void Copy(char* dst, size_t size, const std::string& s) {
  std::strncpy(dst, s.c_str(), size - 1);
  dst[size - 1] = '\0';
}

std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

std::string CudaText(cudaError_t e) { return std::string(cudaGetErrorString(e)); }

// The reason this rank cannot use peer[r]'s region, or "" (and the address in *out).
std::string OpenPeer(const Endpoint& self, const Endpoint& peer, void** out, bool* opened) {
  *opened = false;
  if (std::strcmp(self.host, peer.host) != 0 || std::strcmp(self.boot_id, peer.boot_id) != 0) {
    return std::string("ranks run on different hosts (") + self.host + ", " + peer.host + ")";
  }
  int local = -1;
  if (cudaDeviceGetByPCIBusId(&local, peer.pci_bus) != cudaSuccess) {
    cudaGetLastError();
    local = -1;
  }
  if (local >= 0 && local != self.device) {
    int can = 0;
    cudaDeviceCanAccessPeer(&can, self.device, local);
    if (!can) {
      return "GPU " + std::string(self.pci_bus) + " has no peer access to GPU " + peer.pci_bus;
    }
  }
  if (peer.pid == self.pid) {  // threads of one process: the pointer itself, peer access on
    if (local < 0) return "GPU " + std::string(peer.pci_bus) + " is not visible to this process";
    if (local != self.device) {
      const cudaError_t e = cudaDeviceEnablePeerAccess(local, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError();
        return "cudaDeviceEnablePeerAccess: " + CudaText(e);
      }
      cudaGetLastError();
    }
    *out = reinterpret_cast<void*>(peer.pointer);
    return "";
  }
  const cudaError_t e = cudaIpcOpenMemHandle(out, peer.handle, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return "cudaIpcOpenMemHandle: " + CudaText(e);
  }
  *opened = true;
  return "";
}

}  // namespace

Result<std::unique_ptr<PeerAllReduce>> PeerAllReduce::Create(comm::Communicator& comm, int device,
                                                             size_t capacity_floats,
                                                             std::chrono::milliseconds timeout,
                                                             kernels::PeerProtocol protocol) {
  const int world = comm.world_size(), rank = comm.rank();
  if (world > kernels::kPeerMaxRanks) {
    return UnavailableError("peer all-reduce: " + std::to_string(world) + " ranks (at most " +
                            std::to_string(kernels::kPeerMaxRanks) + ")");
  }
  std::unique_ptr<PeerAllReduce> p(new PeerAllReduce());
  p->device_ = device;
  p->args_.rank = rank;
  p->args_.world = world;
  p->args_.capacity = capacity_floats;
  p->args_.timeout_ns = static_cast<uint64_t>(timeout.count()) * 1'000'000ull;
  p->args_.protocol = protocol;

  std::vector<Endpoint> all(world);
  Endpoint& self = all[rank];
  char host[64] = {};
  gethostname(host, sizeof(host) - 1);
  Copy(self.host, sizeof(self.host), host);
  Copy(self.boot_id, sizeof(self.boot_id), BootId());
  self.pid = static_cast<int32_t>(getpid());
  self.device = device;
  std::string error;
  auto fail = [&](const std::string& what, cudaError_t e) {
    cudaGetLastError();
    if (error.empty()) error = what + ": " + CudaText(e);
  };
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) fail("cudaSetDevice", e);
  if (cudaError_t e = cudaDeviceGetPCIBusId(self.pci_bus, sizeof(self.pci_bus), device);
      e != cudaSuccess) {
    fail("cudaDeviceGetPCIBusId", e);
  }
  const size_t bytes = kernels::PeerRegionBytes(capacity_floats, world);
  if (error.empty()) {
    if (cudaError_t e = cudaMalloc(&p->own_region_, bytes); e != cudaSuccess) {
      p->own_region_ = nullptr;
      fail("cudaMalloc of " + std::to_string(bytes) + " bytes", e);
    }
  }
  if (error.empty()) {
    if (cudaError_t e =
            cudaMalloc(reinterpret_cast<void**>(&p->args_.epochs), kernels::kPeerEpochBytes);
        e != cudaSuccess) {
      p->args_.epochs = nullptr;
      fail("cudaMalloc", e);
    }
  }
  if (error.empty()) {
    if (Status s = kernels::PeerRegionInit(p->own_region_, capacity_floats, world); !s.ok()) {
      cudaGetLastError();
      error = "setting up the region: " + s.message();
    }
  }
  if (error.empty()) {
    cudaError_t e = cudaMemset(p->args_.epochs, 0, kernels::kPeerEpochBytes);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) fail("zeroing the call state", e);
  }
  if (error.empty()) {
    if (cudaError_t e = cudaIpcGetMemHandle(&self.handle, p->own_region_); e != cudaSuccess) {
      fail("cudaIpcGetMemHandle", e);
    }
  }
  self.pointer = reinterpret_cast<uint64_t>(p->own_region_);
  self.ok = error.empty() ? 1 : 0;
  Copy(self.error, sizeof(self.error), error);
  for (int r = 0; r < world; ++r) {
    SPARK_RETURN_IF_ERROR(comm.Broadcast(&all[r], sizeof(Endpoint), r));
  }
  for (int r = 0; r < world && error.empty(); ++r) {
    if (!all[r].ok) {
      error = "rank " + std::to_string(r) + ": " + all[r].error;
    } else if (r == rank) {
      p->args_.regions[r] = p->own_region_;
    } else {
      bool opened = false;
      const std::string why = OpenPeer(self, all[r], &p->args_.regions[r], &opened);
      if (opened) p->opened_[r] = p->args_.regions[r];
      if (!why.empty()) error = "rank " + std::to_string(r) + ": " + why;
    }
  }
  // Every rank must take the same path: any rank's failure turns it off everywhere.
  float failed = error.empty() ? 0.0f : 1.0f;
  SPARK_RETURN_IF_ERROR(comm.AllReduceSum(&failed, 1));
  if (failed > 0) {
    return UnavailableError(
        "peer all-reduce: " +
        (error.empty() ? std::string("another rank could not map the regions") : error));
  }
  return p;
}

PeerAllReduce::~PeerAllReduce() {
  cudaSetDevice(device_);
  for (void* region : opened_) {
    if (region != nullptr) cudaIpcCloseMemHandle(region);
  }
  if (own_region_ != nullptr) cudaFree(own_region_);
  if (args_.epochs != nullptr) cudaFree(args_.epochs);
  cudaGetLastError();
}

}  // namespace spark::engine::backend::cuda
