// LibsshTransport against a real sshd on 127.0.0.1 (label sim: needs root; skipped otherwise).
#include "sparkctl/ssh/libssh_transport.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "sparkctl/ssh/parallel.h"
#include "sparkctl/ssh/self_copy.h"
#include "sshd_server.h"

namespace spark::ssh {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using ::testing::HasSubstr;
using testing::Shell;
using testing::SshdServer;

std::string RandomBytes(size_t size, unsigned seed) {
  std::mt19937 rng(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
  return bytes;
}

std::string ReadLocal(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

milliseconds Since(steady_clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
}

// Accepts TCP connections and never says a word: a node whose sshd hangs.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(fd_, 8);
  }
  ~SilentListener() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

class LibsshTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = SshdServer::SkipReason(); !why.empty()) GTEST_SKIP() << why;
    Result<SshdServer> server = SshdServer::Prepare(::testing::TempDir());
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_.emplace(std::move(*server));
    Status config = server_->CheckConfig();
    ASSERT_TRUE(config.ok()) << config.ToString();
    Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started.ToString();
    known_hosts_ = server_->dir() + "/client/known_hosts";
  }

  NodeSpec Spec(const std::string& name, HostKeyPolicy policy = HostKeyPolicy::kAcceptNew) {
    return NodeSpec{.name = name,
                    .address = "127.0.0.1",
                    .port = server_->port(),
                    .user = "root",
                    .identity_file = server_->client_key(),
                    .known_hosts = known_hosts_,
                    .host_key_policy = policy,
                    .connect_timeout = milliseconds(2000),
                    .command_timeout = milliseconds(20000)};
  }

  std::unique_ptr<LibsshTransport> Make(std::vector<NodeSpec> specs) {
    Result<std::unique_ptr<LibsshTransport>> transport = LibsshTransport::Create(std::move(specs));
    EXPECT_TRUE(transport.ok()) << transport.status().ToString();
    return transport.ok() ? std::move(*transport) : nullptr;
  }

  std::unique_ptr<LibsshTransport> MakeOne(HostKeyPolicy policy = HostKeyPolicy::kAcceptNew) {
    return Make({Spec("spark-1", policy)});
  }

  std::string Tmp(const std::string& name) { return server_->dir() + "/" + name; }

  std::optional<SshdServer> server_;
  std::string known_hosts_;
};

TEST_F(LibsshTransportTest, RunReturnsStdoutStderrAndExitCode) {
  auto t = MakeOne();
  Result<CommandResult> r = t->Run("spark-1", "echo out; echo err >&2; exit 3");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "out\n");
  EXPECT_EQ(r->stderr_data, "err\n");
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_FALSE(r->ok());
  Result<CommandResult> ok = t->Run("spark-1", "true");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->exit_code, 0);
  Result<CommandResult> checked = RunChecked(*t, "spark-1", "echo 'no such module' >&2; exit 7");
  EXPECT_EQ(checked.status().code(), StatusCode::kAborted);
  EXPECT_THAT(checked.status().message(), HasSubstr("spark-1: "));
  EXPECT_THAT(checked.status().message(), HasSubstr("exited with status 7: no such module"));
}

TEST_F(LibsshTransportTest, LargeBinaryOutputOnBothStreamsIsExact) {
  const std::string payload = RandomBytes(3 << 20, 1);  // 3 MiB with NULs and high bytes.
  std::ofstream(Tmp("payload"), std::ios::binary) << payload;
  auto t = MakeOne();
  auto start = steady_clock::now();
  Result<CommandResult> r =
      t->Run("spark-1", "cat " + Tmp("payload") + "; cat " + Tmp("payload") + " >&2");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::printf("[ metric ] 2 x 3 MiB command output in %lld ms\n",
              static_cast<long long>(Since(start).count()));
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_TRUE(r->stdout_data == payload) << "stdout differs, size " << r->stdout_data.size();
  EXPECT_TRUE(r->stderr_data == payload) << "stderr differs, size " << r->stderr_data.size();
}

TEST_F(LibsshTransportTest, StdinReachesTheCommand) {
  auto t = MakeOne();
  RunOptions options;
  options.stdin_data = RandomBytes(100000, 2);
  Result<CommandResult> r = t->Run("spark-1", "wc -c", options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "100000\n");
}

TEST_F(LibsshTransportTest, OutputLimitIsEnforced) {
  auto t = MakeOne();
  RunOptions options;
  options.max_output_bytes = 1000;
  Result<CommandResult> r = t->Run("spark-1", "head -c 100000 /dev/zero", options);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
}

TEST_F(LibsshTransportTest, TimeoutKillsTheCommandWithinTheDeadline) {
  auto t = MakeOne();
  ASSERT_TRUE(t->Connect("spark-1").ok());
  RunOptions options;
  options.timeout = milliseconds(1000);
  auto start = steady_clock::now();
  Result<CommandResult> r = t->Run("spark-1", "echo started; sleep 29.7", options);
  milliseconds elapsed = Since(start);
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(r.status().message(), HasSubstr("spark-1: `echo started; sleep 29.7`"));
  EXPECT_THAT(r.status().message(), HasSubstr("started"));
  EXPECT_GE(elapsed, milliseconds(950));
  EXPECT_LT(elapsed, milliseconds(2000));
  bool gone = false;
  for (int i = 0; i < 40 && !gone; ++i) {
    gone = !Shell("pgrep -f 'sleep 29[.]7'").ok();
    if (!gone) std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_TRUE(gone) << "the remote sleep survived the timeout";
  Result<CommandResult> after = t->Run("spark-1", "echo again");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->stdout_data, "again\n");
}

TEST_F(LibsshTransportTest, ReusesOneSessionAndReconnectsWhenDropped) {
  auto t = MakeOne();
  constexpr int kRuns = 20;
  auto start = steady_clock::now();
  for (int i = 0; i < kRuns; ++i) {
    Result<CommandResult> r = t->Run("spark-1", "echo " + std::to_string(i));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->stdout_data, std::to_string(i) + "\n");
  }
  std::printf("[ metric ] %d commands on one session: %.1f ms each (first includes connect)\n",
              kRuns, static_cast<double>(Since(start).count()) / kRuns);
  EXPECT_EQ(t->ConnectCount("spark-1"), 1);
  std::string log = server_->Log();
  size_t accepted = 0;
  for (size_t pos = 0; (pos = log.find("Accepted publickey", pos)) != std::string::npos; ++pos) {
    ++accepted;
  }
  EXPECT_EQ(accepted, 1u) << log;

  // Kill the sshd process that serves this connection: the command reports the loss...
  Result<CommandResult> dropped = t->Run("spark-1", "kill -9 $PPID; sleep 5");
  EXPECT_EQ(dropped.status().code(), StatusCode::kUnavailable) << dropped.status().ToString();
  EXPECT_THAT(dropped.status().message(), HasSubstr("spark-1: connection to"));
  // ...and the next one reconnects by itself.
  Result<CommandResult> back = t->Run("spark-1", "echo back");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->stdout_data, "back\n");
  EXPECT_EQ(t->ConnectCount("spark-1"), 2);
}

TEST_F(LibsshTransportTest, RunAllIsParallelAndADeadNodeFailsAlone) {
  Result<int> closed = testing::FreePort();
  ASSERT_TRUE(closed.ok());
  std::vector<NodeSpec> specs;
  std::vector<std::string> names;
  for (int i = 1; i <= 4; ++i) {
    specs.push_back(Spec("spark-" + std::to_string(i)));
    names.push_back(specs.back().name);
  }
  NodeSpec dead = Spec("spark-dead");
  dead.port = *closed;
  specs.push_back(dead);
  names.push_back("spark-dead");
  auto t = Make(specs);
  ASSERT_TRUE(t->Connect("spark-1").ok());  // Host key recorded once, before the fan-out.
  auto start = steady_clock::now();
  std::vector<NodeRun> runs = RunAll(*t, names, "sleep 1; echo done");
  milliseconds elapsed = Since(start);
  std::printf("[ metric ] RunAll of `sleep 1` on 4 nodes + 1 dead: %lld ms\n",
              static_cast<long long>(elapsed.count()));
  ASSERT_EQ(runs.size(), 5u);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(runs[i].result.ok()) << runs[i].result.status().ToString();
    EXPECT_EQ(runs[i].result->stdout_data, "done\n");
  }
  EXPECT_EQ(runs[4].node, "spark-dead");
  EXPECT_EQ(runs[4].result.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(runs[4].result.status().message(), HasSubstr("spark-dead: unreachable"));
  EXPECT_THAT(runs[4].result.status().message(), HasSubstr("Connection refused"));
  // Run one after another, the sleeps alone would take 4 s (plus ~0.5 s per command here).
  EXPECT_LT(elapsed, milliseconds(3800)) << "4 x sleep 1 must overlap";
}

TEST_F(LibsshTransportTest, HangingNodeFailsWithinTheConnectTimeout) {
  SilentListener silent;
  NodeSpec spec = Spec("spark-hung");
  spec.port = silent.port();
  spec.connect_timeout = milliseconds(1000);
  auto t = Make({spec});
  auto start = steady_clock::now();
  Result<CommandResult> r = t->Run("spark-hung", "true");
  milliseconds elapsed = Since(start);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_THAT(r.status().message(), HasSubstr("spark-hung: unreachable"));
  EXPECT_LT(elapsed, milliseconds(2000));
}

TEST_F(LibsshTransportTest, AcceptNewAddsTheKeyThatStrictThenAccepts) {
  auto first = MakeOne(HostKeyPolicy::kAcceptNew);
  ASSERT_TRUE(first->Run("spark-1", "true").ok());
  std::string recorded = ReadLocal(known_hosts_);
  EXPECT_THAT(recorded,
              HasSubstr("[127.0.0.1]:" + std::to_string(server_->port()) + " ssh-ed25519 "));
  // OpenSSH's own tools read what was written.
  Result<std::string> found = Shell(
      "ssh-keygen -F '[127.0.0.1]:" + std::to_string(server_->port()) + "' -f " + known_hosts_);
  EXPECT_TRUE(found.ok()) << found.status().ToString();
  auto strict = MakeOne(HostKeyPolicy::kStrict);
  Result<CommandResult> r = strict->Run("spark-1", "echo trusted");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadLocal(known_hosts_), recorded) << "a known host must not be added twice";
}

TEST_F(LibsshTransportTest, UnknownHostIsRefusedWhenStrict) {
  auto t = MakeOne(HostKeyPolicy::kStrict);
  Result<CommandResult> r = t->Run("spark-1", "true");
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  Result<std::string> fingerprint = server_->HostFingerprint();
  ASSERT_TRUE(fingerprint.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("spark-1: unknown host"));
  EXPECT_THAT(r.status().message(), HasSubstr(*fingerprint));
  EXPECT_TRUE(ReadLocal(known_hosts_).empty());
}

TEST_F(LibsshTransportTest, ChangedHostKeyIsRefusedWithTheNewFingerprint) {
  ASSERT_TRUE(MakeOne()->Run("spark-1", "true").ok());
  const std::string before = ReadLocal(known_hosts_);
  Status restarted = server_->RestartWithNewHostKey();
  ASSERT_TRUE(restarted.ok()) << restarted.ToString();
  Result<std::string> fingerprint = server_->HostFingerprint();
  ASSERT_TRUE(fingerprint.ok());

  auto t = MakeOne(HostKeyPolicy::kAcceptNew);  // Even accept_new never replaces a key.
  Result<CommandResult> r = t->Run("spark-1", "true");
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  const std::string& message = r.status().message();
  EXPECT_THAT(message, HasSubstr("spark-1: HOST KEY CHANGED"));
  EXPECT_THAT(message, HasSubstr(*fingerprint));
  EXPECT_THAT(message, HasSubstr("line 1 of " + known_hosts_));
  const std::string fix = "ssh-keygen -R '[127.0.0.1]:" + std::to_string(server_->port()) +
                          "' -f '" + known_hosts_ + "'";
  EXPECT_THAT(message, HasSubstr(fix));
  EXPECT_EQ(ReadLocal(known_hosts_), before);

  // Following the advice (then accept_new) gets the node back.
  ASSERT_TRUE(Shell(fix).ok());
  auto again = MakeOne(HostKeyPolicy::kAcceptNew);
  Result<CommandResult> ok = again->Run("spark-1", "true");
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST_F(LibsshTransportTest, WrongKeyFailsAuthentication) {
  ASSERT_TRUE(Shell("ssh-keygen -q -t ed25519 -N '' -f " + Tmp("stranger")).ok());
  NodeSpec spec = Spec("spark-1");
  spec.identity_file = Tmp("stranger");
  auto t = Make({spec});
  Result<CommandResult> r = t->Run("spark-1", "true");
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(r.status().message(), HasSubstr("spark-1: authentication failed"));
  EXPECT_THAT(r.status().message(), HasSubstr(Tmp("stranger")));

  spec.identity_file = Tmp("no-such-key");
  auto missing = Make({spec});
  Result<CommandResult> m = missing->Run("spark-1", "true");
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), HasSubstr("spark-1: identity file"));
}

TEST_F(LibsshTransportTest, UnknownNodeIsNotFound) {
  auto t = MakeOne();
  Result<CommandResult> r = t->Run("spark-l", "true");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("did you mean 'spark-1'"));
}

TEST_F(LibsshTransportTest, UploadIsAtomicChecksummedAndReplacesOldFiles) {
  const std::string local = Tmp("upload.bin");
  std::ofstream(local, std::ios::binary) << RandomBytes(8 << 20, 3);
  ASSERT_TRUE(Shell("mkdir -p " + Tmp("remote")).ok());
  const std::string remote = Tmp("remote/tool");
  ASSERT_TRUE(Shell("echo old > " + remote).ok());
  auto t = MakeOne();
  ASSERT_TRUE(t->Connect("spark-1").ok());
  auto start = steady_clock::now();
  Status up = t->Upload("spark-1", local, remote, 0750);
  milliseconds elapsed = Since(start);
  ASSERT_TRUE(up.ok()) << up.ToString();
  std::printf("[ metric ] SFTP upload 8 MiB: %lld ms (%.0f MiB/s)\n",
              static_cast<long long>(elapsed.count()),
              8000.0 / std::max<long long>(1, elapsed.count()));
  Result<CommandResult> sum =
      RunChecked(*t, "spark-1", "sha256sum " + remote + "; stat -c %a " + remote);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->stdout_data.substr(0, 64), *Sha256File(local));
  EXPECT_THAT(sum->stdout_data, HasSubstr("\n750\n"));
  Result<std::string> leftovers = Shell("ls -a " + Tmp("remote"));
  EXPECT_EQ(*leftovers, ".\n..\ntool\n") << "no temporary file may remain";

  Status no_dir = t->Upload("spark-1", local, Tmp("missing/tool"), 0755);
  EXPECT_EQ(no_dir.code(), StatusCode::kNotFound) << no_dir.ToString();
  EXPECT_THAT(no_dir.message(), HasSubstr("spark-1: "));
}

TEST_F(LibsshTransportTest, WriteFileAndReadFileRoundTripBinary) {
  auto t = MakeOne();
  const std::string contents = RandomBytes(200000, 4);
  ASSERT_TRUE(t->WriteFile("spark-1", Tmp("written"), contents, 0600).ok());
  Result<std::string> back = t->ReadFile("spark-1", Tmp("written"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == contents);
  EXPECT_EQ(*Shell("stat -c %a " + Tmp("written")), "600\n");
  Result<std::string> missing = t->ReadFile("spark-1", Tmp("nothing-here"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("spark-1: "));
  EXPECT_THAT(missing.status().message(), HasSubstr(Tmp("nothing-here")));
}

TEST_F(LibsshTransportTest, FileCopyUploadsOnceThenSkipsUntilTheFileDiffers) {
  auto t = MakeOne();
  const std::string remote = Tmp("lib/sparkctl/sparkctl");
  Result<RemoteFile> first = EnsureFileOnNode(*t, "spark-1", "/proc/self/exe", remote);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->uploaded);
  EXPECT_EQ(first->sha256, *Sha256File("/proc/self/exe"));
  EXPECT_EQ(*Sha256File(remote), first->sha256);
  EXPECT_EQ(access(remote.c_str(), X_OK), 0);

  Result<RemoteFile> second = EnsureFileOnNode(*t, "spark-1", "/proc/self/exe", remote);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_FALSE(second->uploaded);

  ASSERT_TRUE(Shell("echo other-build >> " + remote).ok());
  Result<RemoteFile> third = EnsureFileOnNode(*t, "spark-1", "/proc/self/exe", remote);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_TRUE(third->uploaded);
  EXPECT_EQ(*Sha256File(remote), first->sha256);
}

}  // namespace
}  // namespace spark::ssh
