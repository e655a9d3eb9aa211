// One-shot all-reduce (fp32 sum) among GPUs of one host that can read each other's memory
// (NVLink or PCIe peer access), for the small tensors of tensor-parallel decode, where NCCL's
// per-call latency dominates. Graph-capturable: all state lives in device memory.
//
// Every rank exposes a region (PeerRegionBytes) to the others: signal slots, then two data
// halves of `capacity` floats. Block b of every rank handles the same slice of the tensor. A
// call: block b copies its slice of the input into its rank's half (epoch parity), tells each
// peer so (a release store of the epoch into the peer's slot for (b, this rank)), waits for
// every peer's signal in its own slots (acquire), then sums the slice over all ranks' halves in
// rank order (every rank gets bit-identical results) into the input. Alternating halves make
// one barrier per call enough: a rank can only write a half again two calls later, after every
// peer has finished the call that read it. Epoch counters (one per block) live in device memory
// of each rank and advance once per call of that block.
// A peer that never arrives (a dead rank) traps the kernel after `timeout_ns`: the stream's
// next wait fails instead of spinning forever.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "base/status.h"

namespace spark::kernels {

constexpr int kPeerMaxRanks = 8;
constexpr int kPeerMaxBlocks = 64;

// Bytes of one rank's region for tensors of up to capacity_floats floats.
size_t PeerRegionBytes(size_t capacity_floats);
// Bytes of one rank's epoch counters (zero them before the first call).
constexpr size_t kPeerEpochBytes = kPeerMaxBlocks * sizeof(uint64_t);

struct PeerAllReduceArgs {
  void* regions[kPeerMaxRanks] = {};  // every rank's region as this process addresses it
  uint64_t* epochs = nullptr;         // this rank's counters (device memory)
  int rank = 0;
  int world = 0;
  size_t capacity = 0;  // floats per data half
  uint64_t timeout_ns = 60'000'000'000ull;
};

// In place on data[0, count) (device memory, 16-byte aligned, count <= capacity) on `stream`.
// InvalidArgument for a size, alignment or world outside those limits.
Status PeerAllReduceSum(const PeerAllReduceArgs& args, float* data, size_t count,
                        cudaStream_t stream);

}  // namespace spark::kernels
