// GlooStore: adapts our Rendezvous to gloo::rendezvous::Store so Gloo's connectFullMesh can
// exchange pair addresses through rank 0's store. Gloo's Store interface reports failure by
// exception; this adapter throws gloo::IoException and keeps the Status that caused it, so the
// caller (GlooCommunicator, which catches every Gloo exception) can return the real code.
// Keys are prefixed with the session name so several jobs can share one store.
// Thread-safety: as Rendezvous (calls are serialised).
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <string>
#include <vector>

#include "base/status.h"
#include "comm/rendezvous.h"

namespace spark::comm {

class GlooStore : public ::gloo::rendezvous::Store {
 public:
  GlooStore(Rendezvous* rendezvous, std::string prefix, std::chrono::milliseconds timeout)
      : rendezvous_(rendezvous), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // The Status behind the last exception thrown, OK if none.
  const Status& last_error() const { return last_error_; }

 private:
  [[noreturn]] void Fail(Status status);

  Rendezvous* rendezvous_;
  const std::string prefix_;
  const std::chrono::milliseconds timeout_;
  Status last_error_;
};

}  // namespace spark::comm
