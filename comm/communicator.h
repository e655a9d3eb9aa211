// Communicator: the collectives that tensor parallelism needs between the ranks of one engine.
//
// One Communicator per rank (process or thread). Every rank must call the same collectives in
// the same order with the same sizes; a collective returns only when this rank's part is done.
// Implementations: Gloo over TCP (CPU ranks, see gloo_communicator.h) and an in-process group
// for N threads (tests, `generate --tp N` in one process, see local_communicator.h); NCCL later.
// Errors name the rank and, for network backends, the peer address; a peer that does not answer
// gives DeadlineExceeded after CommOptions::timeout rather than a hang.
// Thread-safety: a Communicator is used by one thread at a time (the rank's engine thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace spark::comm {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // In place: data[i] becomes the sum of data[i] over all ranks.
  virtual Status AllReduceSum(float* data, size_t count) = 0;

  // out (world_size * count floats) receives rank r's `in` at out + r * count.
  virtual Status AllGather(const float* in, size_t count, float* out) = 0;

  // Copies `bytes` bytes at `data` from rank `root` to every other rank. InvalidArgument for a
  // root outside [0, world_size).
  virtual Status Broadcast(void* data, size_t bytes, int root) = 0;

  // Returns once every rank has entered the barrier.
  virtual Status Barrier() = 0;

  // Whether AllReduceSum and AllGather of device tensors may be called inside a backend's graph
  // step (captured and replayed); see StreamOrderedCommunicator.
  virtual bool collectives_in_graphs() const { return false; }
};

// How a rank finds its peers. Defaults fit one process on one machine.
struct CommOptions {
  // "gloo" (TCP, one process per rank) or "local" (world_size 1 only through this factory;
  // use CreateLocalGroup for N threads).
  std::string backend = "gloo";
  int rank = 0;
  int world_size = 1;
  // Rank 0 serves the rendezvous store at master_addr:master_port; the others connect to it.
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Address this rank's Gloo pairs listen on; empty = master_addr for rank 0, else the local
  // address of the route to master_addr.
  std::string listen_addr;
  // Deadline for the rendezvous and for each collective.
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
};

// Creates and connects the communicator of one rank. Blocks until all ranks have joined.
// Returns InvalidArgument (bad rank/world/backend), DeadlineExceeded (a rank never showed up:
// the message names it), Unavailable (cannot reach the master).
Result<std::unique_ptr<Communicator>> CreateCommunicator(const CommOptions& options);

// World-size-N group living in one process: element r is rank r; use each from its own thread.
std::vector<std::unique_ptr<Communicator>> CreateLocalGroup(
    int world_size, std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Broadcasts a variable-length byte string from `root` (size first, then the bytes); on other
// ranks `bytes` is replaced. Used for StepPlans.
Status BroadcastBytes(Communicator& comm, std::vector<uint8_t>* bytes, int root);

}  // namespace spark::comm
