#include <gtest/gtest.h>

#include "sparkctl/sim/faults.h"
#include "sparkctl/sim/node_image.h"

namespace spark::sim {
namespace {

TEST(FaultParseTest, ParsesEveryKind) {
  EXPECT_EQ(ParseFault({"unplug", "spark-1", "p0"})->port, 0);
  EXPECT_EQ(ParseFault({"plug", "1", "1"})->port, 1);
  EXPECT_EQ(ParseFault({"miscable"})->kind, FaultKind::kMiscable);
  EXPECT_EQ(ParseFault({"kernel", "0", "7.0.0-1019-nvidia"})->value, "7.0.0-1019-nvidia");
  EXPECT_EQ(ParseFault({"cma", "0", "0"})->kind, FaultKind::kCma);
  EXPECT_EQ(ParseFault({"memlock", "0", "unlimited"})->kind, FaultKind::kMemlock);
  EXPECT_EQ(ParseFault({"sshd", "0", "stop"})->value, "stop");
  EXPECT_EQ(ParseFault({"forward-drop", "spark-0"})->node, "spark-0");
  EXPECT_EQ(ParseFault({"kill", "0", "spark-engine"})->value, "spark-engine");
  EXPECT_EQ(ParseFault({"memory", "1", "2097152"})->value, "2097152");
  EXPECT_EQ(ParseFault({"clear"})->kind, FaultKind::kClear);
}

struct BadCase {
  std::vector<std::string> args;
  std::string message_part;
};

TEST(FaultParseTest, RejectsWithHelpfulMessages) {
  const std::vector<BadCase> cases = {
      {{}, "which fault"},
      {{"unplg", "0", "0"}, "did you mean 'unplug'"},
      {{"unplug", "0"}, "usage: sparkctl sim fault unplug NODE PORT"},
      {{"unplug", "0", "2"}, "must be 0 or 1"},
      {{"cma", "0", "lots"}, "size in KiB"},
      {{"memlock", "0", "-5"}, "unlimited"},
      {{"sshd", "0", "restart"}, "stop or start"},
      {{"machine-id", "0", "xyz"}, "32 lowercase hex"},
      {{"memory", "0", "2GiB"}, "MemAvailable in KiB"},
  };
  for (const BadCase& c : cases) {
    Result<Fault> f = ParseFault(c.args);
    ASSERT_FALSE(f.ok());
    EXPECT_NE(f.status().message().find(c.message_part), std::string::npos)
        << f.status().message();
  }
}

TEST(NodeImageTest, MeminfoCarriesCma) {
  std::string text = MeminfoText(0);
  EXPECT_NE(text.find("CmaTotal:              0 kB"), std::string::npos) << text;
  EXPECT_NE(text.find("MemTotal:       127601864 kB"), std::string::npos);
}

TEST(NodeImageTest, MeminfoCarriesMemAvailable) {
  std::string text = MeminfoText(0, 2097152);
  EXPECT_NE(text.find("MemAvailable:    2097152 kB"), std::string::npos) << text;
  EXPECT_NE(text.find("MemFree:               0 kB"), std::string::npos);
  EXPECT_NE(MeminfoText(0).find("MemAvailable:   123894660 kB"), std::string::npos);
}

TEST(NodeImageTest, MemlockToPrlimit) {
  EXPECT_EQ(*MemlockPrlimitArg("unlimited"), "unlimited:unlimited");
  EXPECT_EQ(*MemlockPrlimitArg("64"), "65536:65536");
  EXPECT_FALSE(MemlockPrlimitArg("lots").ok());
}

}  // namespace
}  // namespace spark::sim
