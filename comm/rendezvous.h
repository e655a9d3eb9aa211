// Rendezvous: how the ranks of one job find each other through a key/value store that rank 0
// serves at master_addr:master_port (RendezvousServer). Rank 0 starts the server and connects
// to it like every other rank; the others connect with retries until the deadline.
// Join(session) is the first step of every job: each rank announces itself and waits for all
// the others, so a rank that never shows up gives DeadlineExceeded naming it. The Gloo
// communicator and `sparkctl bench allreduce` both build on this class.
// Thread-safety: calls are serialised on an internal mutex; one connection per Rendezvous.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "comm/rendezvous_server.h"
#include "comm/socket.h"

namespace spark::comm {

struct RendezvousOptions {
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  // 0 on rank 0 = any free port (read it back with port()); tests only.
  int master_port = 29500;
  // Deadline for connecting and for Join.
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
};

class Rendezvous {
 public:
  // Rank 0: serves the store and connects to it. Others: connect with retries.
  // Returns Unavailable (rank 0 cannot bind), DeadlineExceeded (master unreachable), both
  // naming the rank and the address.
  static Result<std::unique_ptr<Rendezvous>> Connect(const RendezvousOptions& options);
  ~Rendezvous();

  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  int port() const { return port_; }
  const RendezvousOptions& options() const { return options_; }

  Status Set(const std::string& key, const std::vector<char>& value);
  // The value of `key`, waiting on the server up to `wait`. NotFound when still unset.
  Result<std::vector<char>> Get(const std::string& key, std::chrono::milliseconds wait);

  // Announces this rank under `session` ("gloo", "bench/1", ...) with `info` (e.g. host:pid)
  // and waits until all ranks did, within options().timeout. Returns the infos by rank, or
  // DeadlineExceeded naming the ranks that never joined. Also a barrier: rank 0 returns last.
  Result<std::vector<std::string>> Join(const std::string& session, const std::string& info);

  // "rank 2: rendezvous 127.0.0.1:29500" — the prefix of every error from this rank.
  std::string Where() const;

 private:
  Rendezvous(RendezvousOptions options, Socket socket, int port,
             std::unique_ptr<RendezvousServer> server);

  Status SendRequest(StoreOp op, const std::string& key, const std::vector<char>& value,
                     uint32_t wait_ms, Clock::time_point deadline);
  // "2, 3": the ranks from `first_missing` on whose join key is unset.
  // Rank 0 returns from Join only after every rank has read all entries, so its store (which
  // dies with rank 0's Rendezvous) never vanishes under a reader. Others just check in.
  Status AwaitReaders(const std::string& session, Clock::time_point deadline);
  std::string MissingRanks(const std::string& session, int first_missing);

  const RendezvousOptions options_;
  std::mutex mu_;
  Socket socket_;
  const int port_;
  std::unique_ptr<RendezvousServer> server_;  // Rank 0 only.
};

}  // namespace spark::comm
