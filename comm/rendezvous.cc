#include "comm/rendezvous.h"

#include <cstring>

namespace spark::comm {

namespace {

// Room for the reply of a server-side wait to travel back.
constexpr auto kReplySlack = std::chrono::seconds(5);

std::string JoinKey(const std::string& session, int rank) {
  return session + "/join/" + std::to_string(rank);
}

void AppendU32(std::vector<char>* frame, uint32_t v) {
  const char* p = reinterpret_cast<const char*>(&v);
  frame->insert(frame->end(), p, p + sizeof(v));
}

}  // namespace

Rendezvous::Rendezvous(RendezvousOptions options, Socket socket, int port,
                       std::unique_ptr<RendezvousServer> server)
    : options_(std::move(options)),
      socket_(std::move(socket)),
      port_(port),
      server_(std::move(server)) {}

Rendezvous::~Rendezvous() {
  socket_.Close();
  if (server_) server_->Stop();
}

std::string Rendezvous::Where() const {
  return "rank " + std::to_string(options_.rank) + ": rendezvous " + options_.master_addr + ":" +
         std::to_string(port_);
}

Result<std::unique_ptr<Rendezvous>> Rendezvous::Connect(const RendezvousOptions& options) {
  const auto deadline = Clock::now() + options.timeout;
  std::unique_ptr<RendezvousServer> server;
  int port = options.master_port;
  const std::string who = "rank " + std::to_string(options.rank);
  if (options.rank == 0) {
    auto started = RendezvousServer::Start(options.master_addr, options.master_port);
    if (!started.ok()) return started.status().WithContext(who + ": serving the rendezvous");
    server = std::move(started).value();
    port = server->port();
  }
  auto socket = ConnectWithRetry(options.master_addr, port, deadline);
  if (!socket.ok()) {
    return socket.status().WithContext(who + ": rendezvous with rank 0 (is rank 0 running?)");
  }
  return std::unique_ptr<Rendezvous>(
      new Rendezvous(options, std::move(socket).value(), port, std::move(server)));
}

Status Rendezvous::SendRequest(StoreOp op, const std::string& key, const std::vector<char>& value,
                               uint32_t wait_ms, Clock::time_point deadline) {
  std::vector<char> frame;
  frame.push_back(static_cast<char>(op));
  AppendU32(&frame, static_cast<uint32_t>(key.size()));
  frame.insert(frame.end(), key.begin(), key.end());
  AppendU32(&frame, static_cast<uint32_t>(value.size()));
  frame.insert(frame.end(), value.begin(), value.end());
  AppendU32(&frame, wait_ms);
  return SendAll(socket_, frame.data(), frame.size(), deadline, Where());
}

Status Rendezvous::Set(const std::string& key, const std::vector<char>& value) {
  if (value.size() > kMaxStoreValueBytes) {
    return InvalidArgumentError(Where() + ": value of " + key + " too large");
  }
  std::lock_guard<std::mutex> lock(mu_);
  const auto deadline = Clock::now() + options_.timeout;
  SPARK_RETURN_IF_ERROR(SendRequest(StoreOp::kSet, key, value, 0, deadline));
  char reply[1 + sizeof(uint32_t)];
  return RecvAll(socket_, reply, sizeof(reply), deadline, Where());
}

Result<std::vector<char>> Rendezvous::Get(const std::string& key, std::chrono::milliseconds wait) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto deadline = Clock::now() + wait + kReplySlack;
  const auto wait_ms = static_cast<uint32_t>(std::max<int64_t>(0, wait.count()));
  SPARK_RETURN_IF_ERROR(SendRequest(StoreOp::kGet, key, {}, wait_ms, deadline));
  uint8_t code = 0;
  uint32_t len = 0;
  SPARK_RETURN_IF_ERROR(RecvAll(socket_, &code, 1, deadline, Where()));
  SPARK_RETURN_IF_ERROR(RecvAll(socket_, &len, sizeof(len), deadline, Where()));
  if (len > kMaxStoreValueBytes) return DataLossError(Where() + ": reply too large");
  std::vector<char> value(len);
  SPARK_RETURN_IF_ERROR(RecvAll(socket_, value.data(), len, deadline, Where()));
  if (code != static_cast<uint8_t>(StoreReply::kOk)) {
    return NotFoundError(Where() + ": key " + key + " not set");
  }
  return value;
}

std::string Rendezvous::MissingRanks(const std::string& session, int first_missing) {
  std::string missing = std::to_string(first_missing);
  for (int r = first_missing + 1; r < options_.world_size; ++r) {
    auto value = Get(JoinKey(session, r), std::chrono::milliseconds(0));
    if (value.ok()) continue;
    if (value.status().code() != StatusCode::kNotFound) {
      return missing + " (and maybe others: the store closed)";
    }
    missing += ", " + std::to_string(r);
  }
  return missing;
}

Result<std::vector<std::string>> Rendezvous::Join(const std::string& session,
                                                  const std::string& info) {
  const auto deadline = Clock::now() + options_.timeout;
  SPARK_RETURN_IF_ERROR(Set(JoinKey(session, options_.rank), {info.begin(), info.end()}));
  std::vector<std::string> infos(options_.world_size);
  for (int r = 0; r < options_.world_size; ++r) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    auto value = Get(JoinKey(session, r), std::max(left, std::chrono::milliseconds(0)));
    if (value.ok()) {
      infos[r].assign(value->begin(), value->end());
      continue;
    }
    if (value.status().code() != StatusCode::kNotFound) return value.status();
    return DeadlineExceededError(Where() + ": session " + session + ": rank(s) " +
                                 MissingRanks(session, r) + " of " +
                                 std::to_string(options_.world_size) + " never joined within " +
                                 std::to_string(options_.timeout.count()) + " ms");
  }
  SPARK_RETURN_IF_ERROR(AwaitReaders(session, deadline));
  return infos;
}

Status Rendezvous::AwaitReaders(const std::string& session, Clock::time_point deadline) {
  SPARK_RETURN_IF_ERROR(Set(session + "/read/" + std::to_string(options_.rank), {}));
  if (options_.rank != 0) return Status::Ok();
  for (int r = 1; r < options_.world_size; ++r) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    auto value =
        Get(session + "/read/" + std::to_string(r), std::max(left, std::chrono::milliseconds(0)));
    if (value.ok()) continue;
    if (value.status().code() != StatusCode::kNotFound) return value.status();
    return DeadlineExceededError(Where() + ": session " + session + ": rank " + std::to_string(r) +
                                 " joined but did not read the others' entries in time");
  }
  return Status::Ok();
}

}  // namespace spark::comm
