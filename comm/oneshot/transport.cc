#include "comm/oneshot/transport.h"

#include <cstring>

#include "base/logging.h"

namespace spark::comm::oneshot {

Transport::Transport(RoutePlan route, std::unique_ptr<Mailbox> mailbox, std::unique_ptr<Wire> wire,
                     TransportOptions options)
    : route_(std::move(route)),
      mailbox_(std::move(mailbox)),
      wire_(std::move(wire)),
      options_(options) {
  wire_->Start(this);
}

Transport::~Transport() {
  // The wire's threads call into this object: stop them before the members go.
  wire_->Close();
}

std::string Transport::Where(uint64_t seq) const {
  return "rank " + std::to_string(route_.rank) + ": one-shot call " + std::to_string(seq);
}

std::string Transport::Lost(int link) const {
  return "rank " + std::to_string(route_.peers[link]) +
         " exited or was killed, or the cable between them is down";
}

void Transport::Flood(const std::string& note, int except) {
  for (int l = 0; l < route_.link_count(); ++l) {
    if (l != except) wire_->SendAbort(l, note);
  }
}

void Transport::Fail(const Status& reason) {
  mailbox_->Break(reason);
  if (!flooded_.exchange(true)) {
    Logger("engine.comm")->error("{}", reason.message());
    Flood(reason.message(), -1);
  }
}

Status Transport::Send(uint64_t seq, uint32_t bytes) {
  SPARK_RETURN_IF_ERROR(broken());
  for (int l = 0; l < route_.link_count(); ++l) {
    Status s = wire_->Put(l, route_.rank, seq, bytes);
    if (!s.ok()) {
      Fail(UnavailableError(Where(seq) + ": cannot send to " + wire_->Describe(l) + ": " +
                            s.message() + ": " + Lost(l)));
      return broken();
    }
  }
  return Status::Ok();
}

Status Transport::WaitFor(int source, uint64_t seq, uint32_t bytes) {
  const auto deadline = Clock::now() + options_.timeout;
  Status s = mailbox_->Wait(source, seq, deadline, options_.spin);
  if (s.code() == StatusCode::kDeadlineExceeded) {
    Fail(DeadlineExceededError(Where(seq) + ": nothing from " + route_.Describe(source) +
                               " within " + std::to_string(options_.timeout.count()) +
                               " ms: rank " + std::to_string(source) +
                               " is stalled or dead (or its relay is); the group is stopped"));
    return broken();
  }
  if (!s.ok()) {
    if (s.code() == StatusCode::kInternal) Fail(s.WithContext(Where(seq)));
    return broken().ok() ? s : broken();
  }
  const uint32_t got = mailbox_->Size(source, seq);
  if (got != bytes) {
    Fail(InvalidArgumentError(Where(seq) + ": rank " + std::to_string(source) + " sent " +
                              std::to_string(got) + " bytes, this rank expected " +
                              std::to_string(bytes) +
                              ": the ranks called different collectives"));
    return broken();
  }
  return Status::Ok();
}

Status Transport::AllReduceSum(float* data, size_t count) {
  const size_t bytes = count * sizeof(float);
  if (bytes > capacity()) {
    return InvalidArgumentError("one-shot all-reduce of " + std::to_string(bytes) +
                                " bytes exceeds the mailbox slot of " +
                                std::to_string(capacity()));
  }
  SPARK_RETURN_IF_ERROR(broken());
  const uint64_t seq = Reserve();
  const int parity = Mailbox::Parity(seq);
  auto* own = reinterpret_cast<float*>(mailbox_->Slot(parity, route_.rank));
  if (bytes > 0) std::memcpy(own, data, bytes);
  SPARK_RETURN_IF_ERROR(Send(seq, static_cast<uint32_t>(bytes)));
  // Fixed order: data = x0, then += x1, += x2, ... whatever order the slices arrived in.
  for (int s = 0; s < route_.world; ++s) {
    const float* src = own;
    if (s != route_.rank) {
      SPARK_RETURN_IF_ERROR(WaitFor(s, seq, static_cast<uint32_t>(bytes)));
      src = reinterpret_cast<const float*>(mailbox_->Slot(parity, s));
    }
    if (s == 0) {
      if (src != data && bytes > 0) std::memcpy(data, src, bytes);
      continue;
    }
    for (size_t i = 0; i < count; ++i) data[i] += src[i];
  }
  return Status::Ok();
}

Status Transport::AllGather(const float* in, size_t count, float* out) {
  const size_t bytes = count * sizeof(float);
  if (bytes > capacity()) {
    return InvalidArgumentError("one-shot all-gather of " + std::to_string(bytes) +
                                " bytes per rank exceeds the mailbox slot of " +
                                std::to_string(capacity()));
  }
  SPARK_RETURN_IF_ERROR(broken());
  const uint64_t seq = Reserve();
  const int parity = Mailbox::Parity(seq);
  if (bytes > 0) std::memcpy(mailbox_->Slot(parity, route_.rank), in, bytes);
  SPARK_RETURN_IF_ERROR(Send(seq, static_cast<uint32_t>(bytes)));
  for (int s = 0; s < route_.world; ++s) {
    if (s != route_.rank) SPARK_RETURN_IF_ERROR(WaitFor(s, seq, static_cast<uint32_t>(bytes)));
    if (bytes > 0) std::memcpy(out + s * count, mailbox_->Slot(parity, s), bytes);
  }
  return Status::Ok();
}

void Transport::OnSlice(int link, int source, uint64_t seq, uint32_t bytes) {
  if (route_.arrives_on[source] != link) {
    Fail(InternalError("rank " + std::to_string(route_.rank) + ": a slice of rank " +
                       std::to_string(source) + " came from " + wire_->Describe(link) +
                       ", the route says it comes from rank " +
                       std::to_string(route_.Via(source)) + ": the ranks disagree on the ring"));
    return;
  }
  mailbox_->Publish(source, seq, bytes);
  for (int next : route_.forward_to[source]) {
    Status s = wire_->Put(next, source, seq, bytes);
    if (!s.ok()) {
      Fail(UnavailableError(Where(seq) + ": cannot relay rank " + std::to_string(source) +
                            "'s slice to " + wire_->Describe(next) + ": " + s.message() + ": " +
                            Lost(next)));
      return;
    }
  }
}

void Transport::OnAbort(int link, const std::string& note) {
  mailbox_->Break(AbortedError("rank " + std::to_string(route_.rank) + ": one-shot group stopped by rank " +
                               std::to_string(route_.peers[link]) + ": " + note));
  if (!flooded_.exchange(true)) Flood(note, link);
}

void Transport::OnLinkDown(int link, const std::string& reason, bool clean) {
  const int peer = route_.peers[link];
  if (clean) {
    mailbox_->Break(FailedPreconditionError("rank " + std::to_string(route_.rank) +
                                            ": rank " + std::to_string(peer) +
                                            " closed its one-shot transport"));
    return;
  }
  Fail(UnavailableError("rank " + std::to_string(route_.rank) + ": one-shot link to " +
                        wire_->Describe(link) + " failed (" + reason + "): " + Lost(link)));
}

}  // namespace spark::comm::oneshot
