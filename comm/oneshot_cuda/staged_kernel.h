// The device half of the one-shot transport for GPU tensors (staged_group.h): one kernel that
// stages this rank's slice into its own mailbox slot in pinned host memory, rings the host's
// doorbell, waits for every peer's slice to land in the mailbox (the host's wire threads write
// it and set the slot's sequence flag), then sums the slots in rank order (or gathers them)
// into device memory. GB10 has no GPUDirect RDMA: the NIC reads and writes host memory, and the
// GPU reads that pinned memory in place.
// CUDA-graph safe: the call's sequence number is an epoch in device memory that the kernel
// itself advances (the last block to finish), so a replayed graph needs nothing from the host
// but the progress thread answering its doorbell. A peer that never delivers, a size that
// differs between ranks, or the host aborting (its transport broke) traps the kernel with the
// reason in StagedControl::error: the stream's next wait fails; the host names the peer.
// Thread-safety: launches from one thread per rank.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "base/status.h"

namespace spark::comm::oneshot {

// Pinned host memory the GPU and the host share (mapped into the device's address space).
struct StagedControl {
  uint64_t bell_seq = 0;  // GPU -> host: the last call whose own slice is staged
  // Each call's size in bytes, by call parity: the GPU can ring call N + 1 before the host has
  // answered call N (call N ends once the peers' slices are in, not ours out), never further.
  uint64_t bell_bytes[2] = {0, 0};
  uint64_t abort = 0;  // host -> GPU: nonzero once the transport is broken
  uint64_t error = 0;  // GPU: why it trapped: (code << 32) | source rank
};
enum StagedError : uint64_t { kStagedTimeout = 1, kStagedAborted = 2, kStagedSize = 3 };

// Device memory: the call count and the grid's rendezvous counters (zero them once).
struct StagedState {
  uint64_t epoch;
  unsigned arrived;
  unsigned done;
};

struct StagedArgs {
  uint8_t* slots = nullptr;         // device address of the mailbox's slots
  const uint64_t* flags = nullptr;  // device address of the flags [2][world]
  const uint32_t* sizes = nullptr;  // device address of the sizes [2][world]
  size_t slot_bytes = 0;            // the mailbox's capacity (slot stride)
  int rank = 0;
  int world = 1;
  StagedControl* control = nullptr;  // device address of the control block
  StagedState* state = nullptr;
  uint64_t timeout_ns = 60'000'000'000ull;
};

// data[0, count) becomes the rank-order sum over ranks (in place), on `stream`.
// InvalidArgument when count * 4 exceeds the slot.
Status StagedAllReduceSum(const StagedArgs& args, float* data, size_t count, cudaStream_t stream);
// out[r * count, (r + 1) * count) receives rank r's in[0, count).
Status StagedAllGather(const StagedArgs& args, const float* in, size_t count, float* out,
                       cudaStream_t stream);

}  // namespace spark::comm::oneshot
