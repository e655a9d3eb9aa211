#include "engine/runtime/stop_strings.h"

#include <gtest/gtest.h>

namespace spark::engine::runtime {
namespace {

struct Case {
  const char* text;
  size_t checked;
  std::vector<std::string> stops;
  bool matched;
  size_t emit_len;
  const char* stop;
};

TEST(StopStringsTest, Table) {
  const std::vector<Case> cases = {
      {"hello world", 0, {"xyz"}, false, 11, ""},
      {"hello world", 0, {"wor"}, true, 6, "wor"},
      {"a STOP b END", 0, {"END", "STOP"}, true, 2, "STOP"},  // Earliest wins, not first listed.
      {"hello wo", 0, {"world"}, false, 6, ""},               // "wo" may become "world".
      {"hello w", 0, {"xw", "world"}, false, 6, ""},
      {"abcab", 0, {"abd"}, false, 3, ""},
      {"xx</s>", 3, {"</s>"}, true, 2, "</s>"},  // Match straddling the checked boundary.
      {"</s> more", 9, {"</s>"}, false, 9, ""},  // An old match is not searched again.
      {"", 0, {"a"}, false, 0, ""},
  };
  for (const Case& c : cases) {
    const StopStringMatch m = FindStopString(c.text, c.checked, c.stops);
    EXPECT_EQ(m.matched, c.matched) << c.text;
    EXPECT_EQ(m.emit_len, c.emit_len) << c.text;
    EXPECT_EQ(m.stop, c.stop) << c.text;
  }
}

}  // namespace
}  // namespace spark::engine::runtime
