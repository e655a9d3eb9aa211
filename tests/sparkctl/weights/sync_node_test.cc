// The node-side file server and fetcher of `weights sync` on loopback: a fetch lands a verified
// file; a server killed mid-transfer leaves a partial that the next fetch resumes; a corrupt
// source is detected and never renamed into place; a good file is never overwritten; a disk
// too small is refused before any byte moves (root: small tmpfs); a server or a stream without
// the sync's key is refused.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "sparkctl/weights/sha256.h"
#include "sparkctl/weights/sync_node.h"
#include "tests/sparkctl/weights/weights_test_util.h"

namespace spark::weights {
namespace {

using namespace testing;  // NOLINT: test helpers

constexpr char kKey[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

// A ServeFiles on 127.0.0.1, any free port, in a thread; stopped (like a kill) on Stop().
class Server {
 public:
  explicit Server(const std::string& dir, uint64_t rate_limit = 0) {
    options_.dir = dir;
    options_.bind = "127.0.0.1";
    options_.port = 0;
    options_.key = kKey;
    options_.rate_limit = rate_limit;
    options_.stop = &stop_;
    std::promise<int> port;
    auto future = port.get_future();
    options_.on_listening = [&port](int p) { port.set_value(p); };
    thread_ = std::thread([this] { status_ = ServeFiles(options_); });
    port_ = future.get();
  }
  ~Server() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const Status& status() const { return status_; }
  void Wait() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  ServeOptions options_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  Status status_;
  int port_ = 0;
};

class SyncNodeTest : public ::testing::Test {
 protected:
  FetchOptions Fetch(const std::string& from, const std::string& file, const std::string& data) {
    return FetchOptions{.from = from, .key = kKey, .file = file, .dir = dst_.path(),
                        .sha256 = Sha256Hex(data), .size = data.size(),
                        .connect_timeout = std::chrono::seconds(2)};
  }
  ScratchDir src_, dst_;
};

TEST_F(SyncNodeTest, FetchLandsAVerifiedFileAndLeavesNoPartial) {
  std::string data = RandomBytes(3 << 20, 1);
  WriteBytes(src_ / "sub/a.bin", data);
  Server server(src_.path());
  Result<FetchResult> r = FetchFile(Fetch(server.address(), "sub/a.bin", data));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->state, "fetched");
  EXPECT_EQ(r->bytes_received, data.size());
  EXPECT_EQ(r->resumed_from, 0u);
  EXPECT_EQ(Sha256sumOf(dst_ / "sub/a.bin"), Sha256Hex(data));
  EXPECT_FALSE(std::filesystem::exists(PartialPath(dst_.path(), "sub/a.bin")));
  EXPECT_EQ(PartialPath(dst_.path(), "sub/a.bin"), dst_ / "sub/.a.bin.sparkctl-partial");
}

TEST_F(SyncNodeTest, KilledServerLeavesPartialThatTheNextFetchResumes) {
  std::string data = RandomBytes(4 << 20, 2);
  WriteBytes(src_ / "a.bin", data);
  std::string partial = PartialPath(dst_.path(), "a.bin");
  Result<FetchResult> first = InternalError("not run");
  {
    Server slow(src_.path(), /*rate_limit=*/2 << 20);  // 2 MiB/s: the file takes ~2 s
    std::thread fetch([&] { first = FetchFile(Fetch(slow.address(), "a.bin", data)); });
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline &&
           (!std::filesystem::exists(partial) || std::filesystem::file_size(partial) < (512 << 10))) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    slow.Stop();  // drops the connection mid-transfer
    fetch.join();
  }
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), StatusCode::kUnavailable) << first.status().ToString();
  EXPECT_NE(first.status().message().find("interrupted after"), std::string::npos);
  EXPECT_NE(first.status().message().find(partial), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dst_ / "a.bin")) << "nothing under the final name";
  uint64_t kept = std::filesystem::file_size(partial);
  ASSERT_GT(kept, 0u);
  ASSERT_LT(kept, data.size());
  EXPECT_EQ(ReadBytes(partial), data.substr(0, kept)) << "the partial is a true prefix";

  Server fast(src_.path());
  Result<FetchResult> second = FetchFile(Fetch(fast.address(), "a.bin", data));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->resumed_from, kept);
  EXPECT_EQ(second->bytes_received, data.size() - kept);
  EXPECT_EQ(Sha256sumOf(dst_ / "a.bin"), Sha256Hex(data));
  EXPECT_FALSE(std::filesystem::exists(partial));
}

TEST_F(SyncNodeTest, CorruptSourceIsDetectedAndNeverRenamedIntoPlace) {
  std::string data = RandomBytes(1 << 20, 3);
  std::string corrupt = data;
  corrupt[12345] ^= 0x01;
  WriteBytes(src_ / "a.bin", corrupt);
  WriteBytes(dst_ / "a.bin", "old bad bytes");  // a corrupt local copy stays as it was
  Server server(src_.path());
  Result<FetchResult> r = FetchFile(Fetch(server.address(), "a.bin", data));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("a.bin received from " + server.address()),
            std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("source copy is corrupt"), std::string::npos);
  EXPECT_EQ(ReadBytes(dst_ / "a.bin"), "old bad bytes");
  EXPECT_FALSE(std::filesystem::exists(PartialPath(dst_.path(), "a.bin")));
}

TEST_F(SyncNodeTest, SourceOfWrongSizeIsRefusedBeforeWriting) {
  std::string data = RandomBytes(1000, 4);
  WriteBytes(src_ / "a.bin", data.substr(0, 900));
  Server server(src_.path());
  Result<FetchResult> r = FetchFile(Fetch(server.address(), "a.bin", data));
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("has a.bin at 900 bytes but the manifest says 1000"),
            std::string::npos) << r.status().message();
  EXPECT_FALSE(std::filesystem::exists(PartialPath(dst_.path(), "a.bin")));
}

TEST_F(SyncNodeTest, GoodFileIsNeverOverwritten) {
  std::string data = RandomBytes(1 << 20, 5);
  WriteBytes(dst_ / "a.bin", data);
  struct stat before {};
  ASSERT_EQ(::stat((dst_ / "a.bin").c_str(), &before), 0);
  // The source is corrupt and there is no server at all: neither may matter.
  Result<FetchResult> r = FetchFile(Fetch("127.0.0.1:1", "a.bin", data));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->state, "already_ok");
  struct stat after {};
  ASSERT_EQ(::stat((dst_ / "a.bin").c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);
  EXPECT_EQ(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
  EXPECT_EQ(before.st_ctim.tv_nsec, after.st_ctim.tv_nsec);
}

TEST_F(SyncNodeTest, AServerWithoutTheKeyIsRefusedBeforeAnythingIsWritten) {
  std::string data = RandomBytes(100, 6);
  WriteBytes(src_ / "a.bin", data);
  Server server(src_.path());
  FetchOptions o = Fetch(server.address(), "a.bin", data);
  o.key = std::string(64, 'f');  // another sync's key: the server cannot prove ours
  Result<FetchResult> r = FetchFile(o);
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("did not prove it holds this sync's key"),
            std::string::npos) << r.status().message();
  EXPECT_FALSE(std::filesystem::exists(PartialPath(dst_.path(), "a.bin")));
  EXPECT_FALSE(std::filesystem::exists(dst_ / "a.bin"));
  EXPECT_FALSE(SendQuit(server.address(), std::string(64, 'f')).ok());
}

// What a host on the network without the key can send: the old request, or a request after
// the handshake with a made-up MAC. Both get an ERR line and not one byte of the file.
std::string RawExchange(const std::string& address, const std::vector<std::string>& lines) {
  auto hp = ParseHostPort(address);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(hp->second));
  ::inet_pton(AF_INET, hp->first.c_str(), &addr.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return "no connect";
  std::string got;
  char buf[4096];
  for (const auto& l : lines) {
    if (::send(fd, l.data(), l.size(), MSG_NOSIGNAL) < 0) break;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return got;
}

TEST_F(SyncNodeTest, AStreamWithoutTheKeyIsRefused) {
  std::string data = "SECRET-SHARD-BYTES";
  WriteBytes(src_ / "a.bin", data);
  Server server(src_.path());
  std::string old = RawExchange(server.address(), {"SPARKCTL-SYNC/1 GET t0k3n 0 a.bin\n"});
  EXPECT_EQ(old.rfind("ERR bad request", 0), 0u) << old;
  std::string forged = RawExchange(
      server.address(), {"SPARKCTL-SYNC/2 HELLO " + std::string(32, 'a') + "\n",
                         std::string(64, '0') + " GET 0 a.bin\n"});
  EXPECT_EQ(forged.rfind("CHALLENGE ", 0), 0u) << forged;
  EXPECT_NE(forged.find("ERR not authenticated"), std::string::npos) << forged;
  EXPECT_EQ(forged.find("SECRET"), std::string::npos) << "no file bytes without the key";
  EXPECT_EQ(forged.find("OK "), std::string::npos) << forged;
}

TEST_F(SyncNodeTest, EscapingPathsAndUnknownFilesAreRefused) {
  std::string data = RandomBytes(100, 6);
  WriteBytes(src_ / "a.bin", data);
  Server server(src_.path());
  FetchOptions o = Fetch(server.address(), "../a.bin", data);
  EXPECT_EQ(FetchFile(o).status().code(), StatusCode::kInvalidArgument);
  o = Fetch(server.address(), "nope.bin", data);
  Result<FetchResult> r = FetchFile(o);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("nope.bin"), std::string::npos);
}

TEST(SyncKeyTest, KeysAreLongRandomAndReadFromTheirFirstLine) {
  std::string a = NewSyncKey(), b = NewSyncKey();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
  ScratchDir dir;
  WriteBytes(dir / "key", a + "\nignored\n");
  EXPECT_EQ(*ReadSyncKey(dir / "key"), a);
  WriteBytes(dir / "short", "abc\n");
  EXPECT_EQ(ReadSyncKey(dir / "short").status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(ReadSyncKey(dir / "absent").ok());
}

TEST_F(SyncNodeTest, NoServerIsUnavailableNamingTheAddress) {
  std::string data = "x";
  FetchOptions o = Fetch("127.0.0.1:1", "a.bin", data);
  o.connect_timeout = std::chrono::milliseconds(300);
  Result<FetchResult> r = FetchFile(o);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("127.0.0.1:1"), std::string::npos);
}

TEST_F(SyncNodeTest, QuitStopsTheServer) {
  Server server(src_.path());
  ASSERT_TRUE(SendQuit(server.address(), kKey).ok());
  server.Wait();
  EXPECT_TRUE(server.status().ok());
}

TEST(SyncNodeParseTest, HostPort) {
  EXPECT_EQ(ParseHostPort("10.0.0.1:51893")->second, 51893);
  EXPECT_EQ(ParseHostPort("[fe80::1]:5")->first, "fe80::1");
  EXPECT_FALSE(ParseHostPort("10.0.0.1").ok());
  EXPECT_FALSE(ParseHostPort("h:0").ok());
  EXPECT_FALSE(ParseHostPort("h:70000").ok());
}

// A receiver whose disk cannot hold the file: refused before any byte moves.
TEST_F(SyncNodeTest, DiskTooSmallIsRefusedBeforeTransfer) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs";
  if (::mount("tmpfs", dst_.path().c_str(), "tmpfs", 0, "size=1m,mode=0755") != 0) {
    GTEST_SKIP() << "cannot mount tmpfs here: " << std::strerror(errno);
  }
  std::string data = RandomBytes(4 << 20, 7);
  WriteBytes(src_ / "a.bin", data);
  Server server(src_.path());
  Result<FetchResult> r = FetchFile(Fetch(server.address(), "a.bin", data));
  std::string listing = RunShell("ls -A " + ShellQuote(dst_.path()));
  ::umount2(dst_.path().c_str(), MNT_DETACH);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().ToString();
  EXPECT_NE(r.status().message().find("a.bin needs 4.00 MiB more"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(listing, "") << "no partial, no final file";
}

}  // namespace
}  // namespace spark::weights
