// The prompt corpus: pieces from any offset are whole UTF-8, since request bodies are JSON and
// a JSON writer refuses a cut character.
#include "sparkctl/serving/corpus.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace spark::serving {
namespace {

TEST(CorpusTest, HasCharactersOfSeveralBytes) {
  // Without them the test below could not fail.
  const std::string_view c = Corpus();
  EXPECT_NE(std::find_if(c.begin(), c.end(), [](char ch) { return (ch & 0x80) != 0; }), c.end());
}

TEST(CorpusTest, PiecesFromEveryOffsetAreWholeUtf8) {
  const size_t size = Corpus().size();
  for (size_t offset = 0; offset < size; ++offset) {
    for (size_t chars : {1, 7}) {
      const std::string piece = CorpusText(offset, chars);
      ASSERT_GE(piece.size(), chars);
      ASSERT_NO_THROW((void)nlohmann::json(piece).dump())
          << "offset " << offset << ", " << chars << " chars: a cut UTF-8 character";
    }
  }
}

TEST(CorpusTest, WrapsAroundTheEnd) {
  const size_t size = Corpus().size();
  EXPECT_GE(CorpusText(size - 3, 100).size(), 100u);
}

}  // namespace
}  // namespace spark::serving
