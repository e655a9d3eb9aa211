// One-shot all-reduce (fp32 sum) among GPUs of one host that can read each other's memory
// (NVLink or PCIe peer access), for the small tensors of tensor-parallel decode, where NCCL's
// per-call latency dominates. Graph-capturable: all state lives in device memory. Every rank
// exposes a region (PeerRegionBytes, set up by PeerRegionInit) to the others, and block b of
// every rank handles the same slice of the tensor. Each call has an epoch: the rank's call count
// (in device memory: the last block of a call to finish advances it). Two protocols
// (PeerProtocol, fixed for a region's life):
//
// kSignal: block b copies its slice into its own region (one of two data halves, by the epoch's
// parity), tells each peer so (a release store of the epoch into the peer's slot for (b, this
// rank)), waits until every peer's slot for (b, peer) holds at least that epoch (acquire), then
// reads the slice from every rank's half. One barrier per call is enough whatever the slices: a
// rank writes a half again only two calls later, and it starts that call only after every peer
// has begun the call in between, which each peer began only once it had finished the call that
// read the half. A call costs a signal over the link and a read back.
// kOneWay: block b stores its slice straight into every peer's region (buffer epoch % 3, the
// slot of this rank) and reads the peers' slices from its own region, polling each element until
// it no longer holds the empty pattern (all bits set; a value with that pattern, a NaN, is sent
// as another NaN); then it sets the buffer of the call before back to empty. With three buffers
// a rank's stores never meet the peer's reads or clearing: a peer can be one call ahead at most.
// A call costs one trip over the link.
//
// Either way the sum runs in rank order, so every rank gets bit-identical results, and calls may
// differ in size, block count and kind (the plain sum, or the sum fused with the residual add
// and RMSNorm below). A peer that never arrives (a dead rank) traps the kernel after
// `timeout_ns`: the stream's next wait fails instead of spinning forever.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "base/status.h"

namespace spark::kernels {

constexpr int kPeerMaxRanks = 8;
constexpr int kPeerMaxBlocks = 64;

enum class PeerProtocol { kSignal, kOneWay };

// Bytes of one rank's region for tensors of up to capacity_floats floats among `world` ranks
// (either protocol).
size_t PeerRegionBytes(size_t capacity_floats, int world);
// Sets a region up for its first call (synchronous).
Status PeerRegionInit(void* region, size_t capacity_floats, int world);
// Bytes of one rank's call state (the epoch, the count of finished blocks, the last call's
// size; zero them before the first call).
constexpr size_t kPeerEpochBytes = 3 * sizeof(uint64_t);

struct PeerAllReduceArgs {
  void* regions[kPeerMaxRanks] = {};  // every rank's region as this process addresses it
  uint64_t* epochs = nullptr;         // this rank's call state (device memory)
  int rank = 0;
  int world = 0;
  size_t capacity = 0;  // floats a call may sum (a multiple of 4)
  uint64_t timeout_ns = 60'000'000'000ull;
  PeerProtocol protocol = PeerProtocol::kSignal;
};

// In place on data[0, count) (device memory, 16-byte aligned, count <= capacity) on `stream`.
// InvalidArgument for a size, alignment, capacity or world outside those limits.
Status PeerAllReduceSum(const PeerAllReduceArgs& args, float* data, size_t count,
                        cudaStream_t stream);

// The sum fused with what follows it in a tensor-parallel layer: for each of `rows` rows of
// `dim`, delta[r] = sum over ranks of delta[r] (the all-reduce, in rank order), h[r] +=
// delta[r], out[r] = h[r] / sqrt(mean(h[r]^2) + eps) * weight, and out_bf16 (when not null)
// out rounded to bf16. Bit-identical to PeerAllReduceSum followed by RmsNorm's residual form
// (kernels/norm.h) on the same rows: one launch and one barrier instead of two kernels.
// Takes rows <= kPeerMaxBlocks (one block a row), rows * dim <= capacity, dim a multiple of 4
// and 16-byte aligned pointers (PeerAddRmsNormFits); InvalidArgument otherwise.
bool PeerAddRmsNormFits(const PeerAllReduceArgs& args, const float* delta, int64_t rows, int dim,
                        const float* h, const float* weight, const float* out,
                        const __nv_bfloat16* out_bf16);
Status PeerAllReduceAddRmsNorm(const PeerAllReduceArgs& args, float* delta, int64_t rows, int dim,
                               float* h, const float* weight, float eps, float* out,
                               __nv_bfloat16* out_bf16, cudaStream_t stream);

}  // namespace spark::kernels
