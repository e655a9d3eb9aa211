// What a newcomer sees for a word no command takes: the unknown command or flag by name, with
// the nearest known one, instead of what the parse left missing.
#include "base/command_line.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace spark {
namespace {

// The message for `words` on a small app shaped like sparkctl's.
std::string UnknownWordOf(std::vector<std::string> words) {
  CLI::App app{"test", "sparkctl"};
  app.require_subcommand(1);
  app.fallthrough();
  CLI::App* profile = app.add_subcommand("profile", "profiles");
  profile->require_subcommand(1);
  profile->add_subcommand("check", "check")->add_option("files");
  profile->add_subcommand("show", "show");
  CLI::App* up = app.add_subcommand("up", "up");
  std::string file;
  up->add_option("-p,--profile", file)->required();
  up->add_flag("--plan");
  app.add_subcommand("monitor", "internal")->group("");
  std::vector<char*> argv = {const_cast<char*>("sparkctl")};
  for (std::string& w : words) argv.push_back(w.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
    return UnknownWordMessage(app);
  }
  return "parsed";
}

TEST(CommandLineTest, UnknownCommandIsNamedWithTheNearest) {
  EXPECT_EQ(UnknownWordOf({"frobnicate"}),
            "sparkctl: unknown command 'frobnicate' (see sparkctl --help)");
  EXPECT_EQ(UnknownWordOf({"profile", "chek"}),
            "sparkctl profile: unknown command 'chek' (did you mean 'check'?) (see sparkctl "
            "profile --help)");
  EXPECT_EQ(UnknownWordOf({"monitr"}), "sparkctl: unknown command 'monitr' (see sparkctl --help)")
      << "hidden commands are not suggested";
}

TEST(CommandLineTest, UnknownFlagWinsOverAMissingRequiredOne) {
  EXPECT_EQ(UnknownWordOf({"up", "--nope"}),
            "sparkctl up: unknown flag '--nope' (see sparkctl up --help)");
  EXPECT_EQ(UnknownWordOf({"up", "--pla", "-p", "x"}),
            "sparkctl up: unknown flag '--pla' (did you mean '--plan'?) (see sparkctl up --help)");
}

TEST(CommandLineTest, NoUnknownWordLeavesTheParseErrorToSpeak) {
  EXPECT_EQ(UnknownWordOf({"up"}), "") << "--profile is required: CLI11 says so";
  EXPECT_EQ(UnknownWordOf({"up", "-p", "x"}), "parsed");
}

}  // namespace
}  // namespace spark
