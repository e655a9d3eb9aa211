// The memory the engine may use (meminfo bounded by cgroup limits, from files laid out like /proc
// and /sys/fs/cgroup), the steady-state guard's states with a fake clock and memory, and the
// engine under it: admission held below the admit floor and resumed after, waiting requests and
// the newest running one failed with Unavailable below the hard floor, every request answered.
#include "engine/runtime/memory_guard.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "comm/local_communicator.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/host_memory.h"
#include "engine/runtime/plan_broadcast.h"
#include "tests/engine/runtime/fake_model_runner.h"

namespace spark::engine::runtime {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kGiB = int64_t{1} << 30;

class HostMemoryTest : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(testing::TempDir()) / ("host_memory_" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    Write("meminfo",
          "MemTotal:       127601864 kB\nMemFree:        1000 kB\nMemAvailable:   "
          "104857600 kB\n");  // 100 GiB available
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  ProcHostMemory Memory() {
    return ProcHostMemory({(root_ / "meminfo").string(), (root_ / "self_cgroup").string(),
                           (root_ / "cgroup").string()});
  }
  fs::path root_;
};

TEST_F(HostMemoryTest, MeminfoAloneWithoutACgroup) {
  auto s = Memory().Read();
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->available_bytes, 100 * kGiB);
  EXPECT_EQ(s->total_bytes, int64_t{127601864} * 1024);
  EXPECT_FALSE(s->cgroup_limit_bytes.has_value());
  EXPECT_EQ(s->Describe(), "100.0 GiB available (MemAvailable)");
}

TEST_F(HostMemoryTest, CgroupV2LimitBindsWithReclaimableCacheCountedFree) {
  Write("self_cgroup", "0::/system.slice/engine.service\n");
  Write("cgroup/system.slice/engine.service/memory.max", std::to_string(8 * kGiB) + "\n");
  Write("cgroup/system.slice/engine.service/memory.current", std::to_string(6 * kGiB) + "\n");
  Write("cgroup/system.slice/engine.service/memory.stat",
        "anon 1\ninactive_file " + std::to_string(kGiB) + "\n");
  Write("cgroup/system.slice/memory.max", "max\n");
  Write("cgroup/system.slice/memory.current", "1\n");
  auto s = Memory().Read();
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->available_bytes, 3 * kGiB);  // 8 - (6 - 1)
  EXPECT_EQ(s->total_bytes, 8 * kGiB);
  EXPECT_EQ(s->cgroup_used_bytes, 5 * kGiB);
  EXPECT_NE(
      s->Describe().find(
          "3.00 GiB available (cgroup limit 8.00 GiB, 5.00 GiB used; MemAvailable 100.0 GiB)"),
      std::string::npos)
      << s->Describe();
}

TEST_F(HostMemoryTest, AnAncestorsLimitCountsAndV1FilesAreRead) {
  Write("self_cgroup", "12:pids:/x\n4:memory:/docker/abc\n0::/\n");
  Write("cgroup/memory/docker/abc/memory.limit_in_bytes", "9223372036854771712\n");
  Write("cgroup/memory/docker/abc/memory.usage_in_bytes", "100\n");
  Write("cgroup/memory/docker/memory.limit_in_bytes", std::to_string(4 * kGiB) + "\n");
  Write("cgroup/memory/docker/memory.usage_in_bytes", std::to_string(kGiB) + "\n");
  auto s = Memory().Read();
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->available_bytes, 3 * kGiB);
}

TEST_F(HostMemoryTest, AMissingMemAvailableLineIsNamed) {
  Write("meminfo", "MemTotal: 1 kB\n");
  auto s = Memory().Read();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("meminfo"), std::string::npos);
  fs::remove(root_ / "meminfo");
  EXPECT_EQ(Memory().Read().status().code(), StatusCode::kNotFound);
}

// A guard over memory the test sets, on a clock the test moves.
struct Rig {
  int64_t available = 10 * kGiB;
  int rank = 0;
  int reads = 0;
  MemoryGuard::Clock::time_point now{};
  MemoryGuard guard{{.admit_floor_bytes = 3 * kGiB, .hard_floor_bytes = kGiB},
                    [this]() -> Result<GroupMemoryReading> {
                      ++reads;
                      return GroupMemoryReading{available, rank};
                    },
                    [this] { return now; }};
  GuardState At(double gib) {
    available = static_cast<int64_t>(gib * kGiB);
    now += std::chrono::seconds(1);
    return guard.Check();
  }
};

TEST(MemoryGuardTest, StatesFollowTheFloorsWithAMarginOnTheWayUp) {
  Rig r;
  EXPECT_EQ(r.At(10), GuardState::kOk);
  EXPECT_EQ(r.At(2.9), GuardState::kNoAdmit);
  EXPECT_EQ(r.At(3.1), GuardState::kNoAdmit);  // within the 256 MiB margin
  EXPECT_EQ(r.At(0.5), GuardState::kShed);
  EXPECT_EQ(r.At(1.1), GuardState::kShed);
  EXPECT_EQ(r.At(1.5), GuardState::kNoAdmit);
  EXPECT_EQ(r.At(3.5), GuardState::kOk);
  const MemoryGuardStatus s = r.guard.status();
  EXPECT_EQ(s.no_admit_trips, 1u);
  EXPECT_EQ(s.shed_trips, 1u);
  EXPECT_EQ(s.available_bytes, static_cast<int64_t>(3.5 * kGiB));
}

TEST(MemoryGuardTest, ReadsAtMostOncePerInterval) {
  Rig r;
  r.guard.Check();
  r.guard.Check();
  r.now += std::chrono::milliseconds(100);
  r.guard.Check();
  EXPECT_EQ(r.reads, 1);
  r.now += std::chrono::milliseconds(200);
  r.guard.Check();
  EXPECT_EQ(r.reads, 2);
}

TEST(MemoryGuardTest, ShedsOneRunningRequestPerInterval) {
  Rig r;
  r.rank = 2;
  EXPECT_EQ(r.At(0.5), GuardState::kShed);
  EXPECT_TRUE(r.guard.TakeShed());
  EXPECT_FALSE(r.guard.TakeShed());
  r.now += std::chrono::milliseconds(300);
  EXPECT_TRUE(r.guard.TakeShed());
  EXPECT_EQ(r.guard.status().shed_requests, 2u);
  EXPECT_EQ(r.guard.Describe(),
            "512.0 MiB available on rank 2's node, below the 1.00 GiB hard floor");
}

constexpr int kVocab = 97;

EngineOptions Options(MemoryGuard* guard) {
  EngineOptions o;
  o.scheduler.max_num_batched_tokens = 64;
  o.scheduler.max_num_seqs = 8;
  o.scheduler.max_model_len = 64;
  o.blocks.num_blocks = 64;
  o.blocks.block_size = 4;
  o.memory_guard = guard;
  return o;
}

std::vector<int32_t> Prompt(int len, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < len; ++i) p.push_back((i * 5 + salt) % kVocab);
  return p;
}

// Runs steps until nothing is unfinished (or `steps` steps); records how each request ended.
struct Ends {
  std::map<uint64_t, Status> error;
  std::map<uint64_t, int> tokens;
};
void Drive(Engine& e, Ends* ends, int steps, Rig* rig) {
  for (int i = 0; i < steps && e.HasUnfinished(); ++i) {
    rig->now += std::chrono::milliseconds(300);
    auto out = e.Step();
    ASSERT_TRUE(out.ok()) << out.status().message();
    for (const TokenOutput& o : *out) {
      if (o.has_token) ++ends->tokens[o.seq_id];
      if (o.finished) ends->error[o.seq_id] = o.error;
    }
  }
}

TEST(EngineMemoryGuardTest, BelowTheAdmitFloorWaitingRequestsWaitThenRun) {
  Rig rig;
  FakeModelRunner runner(kVocab, 64, 4);
  auto engine = Engine::Create(Options(&rig.guard), &runner);
  ASSERT_TRUE(engine.ok());
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 3;
  ASSERT_TRUE((*engine)->AddRequest(1, Prompt(5, 1), p).ok());
  Ends ends;
  Drive(**engine, &ends, 1, &rig);  // request 1 admitted and running
  rig.available = 2 * kGiB;         // the node's memory shrinks
  ASSERT_TRUE((*engine)->AddRequest(2, Prompt(6, 2), p).ok());
  Drive(**engine, &ends, 10, &rig);
  EXPECT_EQ(ends.tokens[1], 3) << "the running request goes on";
  EXPECT_TRUE(ends.error[1].ok());
  EXPECT_EQ(ends.tokens.count(2), 0u) << "the new one waits";
  EXPECT_TRUE((*engine)->HasUnfinished());
  EXPECT_TRUE((*engine)->stalled());
  rig.available = 8 * kGiB;  // memory comes back
  Drive(**engine, &ends, 10, &rig);
  EXPECT_EQ(ends.tokens[2], 3);
  EXPECT_TRUE(ends.error.count(2) && ends.error[2].ok());
  EXPECT_EQ(rig.guard.status().no_admit_trips, 1u);
}

TEST(EngineMemoryGuardTest, BelowTheHardFloorEveryRequestGetsAClearError) {
  Rig rig;
  FakeModelRunner runner(kVocab, 64, 4);
  auto engine = Engine::Create(Options(&rig.guard), &runner);
  ASSERT_TRUE(engine.ok());
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 40;
  ASSERT_TRUE((*engine)->AddRequest(1, Prompt(5, 1), p).ok());
  ASSERT_TRUE((*engine)->AddRequest(2, Prompt(5, 2), p).ok());
  Ends ends;
  Drive(**engine, &ends, 1, &rig);  // both running
  rig.available = kGiB / 2;
  ASSERT_TRUE((*engine)->AddRequest(3, Prompt(5, 3), p).ok());
  Drive(**engine, &ends, 20, &rig);
  ASSERT_EQ(ends.error.size(), 3u) << "every request ended";
  for (uint64_t id : {1, 2, 3}) {
    EXPECT_EQ(ends.error[id].code(), StatusCode::kUnavailable) << id;
    EXPECT_NE(ends.error[id].message().find("host memory is low (512.0 MiB available on rank 0's "
                                            "node, below the 1.00 GiB hard floor)"),
              std::string::npos)
        << ends.error[id].message();
  }
  EXPECT_NE(ends.error[3].message().find("not started"), std::string::npos);
  EXPECT_NE(ends.error[2].message().find("newest running request was stopped"), std::string::npos);
  EXPECT_EQ(rig.guard.status().shed_requests, 3u);
}

// Rank 0 polls every rank's node through the group; the smallest wins.
TEST(PollGroupMemoryTest, TheSmallestNodeAndItsRank) {
  auto group = comm::CreateLocalGroup(3);
  struct Fixed : HostMemory {
    int64_t bytes;
    explicit Fixed(int64_t b) : bytes(b) {}
    Result<HostMemorySample> Read() override { return HostMemorySample{bytes, bytes}; }
  };
  Fixed m0(20 * kGiB), m1(7 * kGiB), m2(12 * kGiB);
  FakeModelRunner r1(kVocab, 4, 4), r2(kVocab, 4, 4);
  std::thread w1([&] { EXPECT_TRUE(RunWorkerLoop(*group[1], r1, &m1).ok()); });
  std::thread w2([&] { EXPECT_TRUE(RunWorkerLoop(*group[2], r2, &m2).ok()); });
  auto reading = PollGroupMemory(*group[0], m0);
  BroadcastingModelRunner root(group[0].get(), &r1);
  EXPECT_TRUE(root.Shutdown().ok());
  w1.join();
  w2.join();
  ASSERT_TRUE(reading.ok()) << reading.status().message();
  EXPECT_EQ(reading->available_bytes, 7 * kGiB);
  EXPECT_EQ(reading->rank, 1);
}

}  // namespace
}  // namespace spark::engine::runtime
