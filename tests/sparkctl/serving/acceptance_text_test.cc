// The check's replies shown in its table and JSON: clipped without breaking a UTF-8 sequence,
// so the --json document always serialises.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sparkctl/serving/acceptance.h"

namespace spark::serving {
namespace {

TEST(ClipTextTest, CutsBeforeAMultibyteSequenceNotInsideIt) {
  // "ab" then U+00E9 (2 bytes) then U+4E2D (3 bytes): cuts at 3, 4 and 6 bytes.
  const std::string s =
      "ab\xC3\xA9\xE4\xB8\xAD"
      "cd";
  EXPECT_EQ(ClipText(s, 3), "ab...");
  EXPECT_EQ(ClipText(s, 4), "ab\xC3\xA9...");
  EXPECT_EQ(ClipText(s, 6), "ab\xC3\xA9...");
  EXPECT_EQ(ClipText(s, 7), "ab\xC3\xA9\xE4\xB8\xAD...");
  EXPECT_EQ(ClipText(s, 100), s);
  for (size_t n = 0; n < s.size(); ++n) {
    nlohmann::json j = ClipText(s, n);
    EXPECT_NO_THROW((void)j.dump()) << "cut at " << n;
  }
}

TEST(ClipTextTest, PutsTheTextOnOneLine) { EXPECT_EQ(ClipText("a\nb\r\tc", 80), "a b  c"); }

}  // namespace
}  // namespace spark::serving
