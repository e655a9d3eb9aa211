// Compares the tokenizer with Hugging Face `tokenizers` on the committed corpus
// (scripts/fixtures/make_tokenizer_fixtures.py) for both real tokenizers.
#include <map>
#include <memory>

#include <gtest/gtest.h>

#include "engine/tokenizer/stream_decoder.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/fixture_util.h"

namespace spark::tokenizer {
namespace {

using testing::FixtureDir;
using testing::ReadJson;
using testing::RealTokenizerDir;

class TokenizerFixtureTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const auto dir = RealTokenizerDir(GetParam());
    if (!std::filesystem::exists(dir / "tokenizer.json")) {
      GTEST_SKIP() << "real tokenizer not found at " << dir;
    }
    // Loading takes a second or more; each real tokenizer is loaded once per test binary.
    static std::map<std::string, std::shared_ptr<Tokenizer>> loaded;
    std::shared_ptr<Tokenizer>& slot = loaded[GetParam()];
    if (slot == nullptr) {
      Result<Tokenizer> tokenizer = Tokenizer::FromDir(dir);
      ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
      slot = std::make_shared<Tokenizer>(std::move(*tokenizer));
    }
    tokenizer_ = slot;
    corpus_ = ReadJson(FixtureDir() / "tokenizer" / "corpus.json")["cases"];
    expected_ = ReadJson(FixtureDir() / "tokenizer" / (GetParam() + ".ids.json"));
    ASSERT_EQ(corpus_.size(), expected_["ids"].size());
  }

  std::shared_ptr<Tokenizer> tokenizer_;
  nlohmann::ordered_json corpus_;
  nlohmann::ordered_json expected_;
};

TEST_P(TokenizerFixtureTest, EncodeMatchesHuggingFace) {
  int failures = 0;
  for (size_t i = 0; i < corpus_.size() && failures < 10; ++i) {
    const std::string text = corpus_[i]["text"];
    const auto want = expected_["ids"][i].get<std::vector<int32_t>>();
    const std::vector<int32_t> got = tokenizer_->Encode(text);
    if (got != want) ++failures;
    EXPECT_EQ(got, want) << "case " << corpus_[i]["name"] << ": " << text;
  }
}

TEST_P(TokenizerFixtureTest, DecodeMatchesHuggingFace) {
  for (size_t i = 0; i < corpus_.size(); ++i) {
    const auto ids = expected_["ids"][i].get<std::vector<int32_t>>();
    const auto& decoded = expected_["decoded"][i];
    const std::string want = decoded.is_null() ? corpus_[i]["text"].get<std::string>()
                                               : decoded.get<std::string>();
    EXPECT_EQ(tokenizer_->Decode(ids), want) << "case " << corpus_[i]["name"];
  }
}

TEST_P(TokenizerFixtureTest, DecodeRandomIdsMatchesHuggingFace) {
  for (const auto& c : expected_["decode_cases"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tokenizer_->Decode(ids), c["text"].get<std::string>()) << c["ids"].dump();
  }
}

TEST_P(TokenizerFixtureTest, StreamDecoderEqualsDecode) {
  auto check = [&](const std::vector<int32_t>& ids) {
    StreamDecoder stream(*tokenizer_);
    std::string text;
    for (int32_t id : ids) text += stream.Push(id);
    text += stream.Flush();
    EXPECT_EQ(text, tokenizer_->Decode(ids));
  };
  for (const auto& ids : expected_["ids"]) check(ids.get<std::vector<int32_t>>());
  for (const auto& c : expected_["decode_cases"]) check(c["ids"].get<std::vector<int32_t>>());
}

TEST_P(TokenizerFixtureTest, AddSpecialAddsConfiguredTokens) {
  const auto prefix = expected_["add_special_prefix"].get<std::vector<int32_t>>();
  const auto suffix = expected_["add_special_suffix"].get<std::vector<int32_t>>();
  for (size_t i = 0; i < 20; ++i) {
    std::vector<int32_t> want = prefix;
    for (int32_t id : expected_["ids"][i]) want.push_back(id);
    want.insert(want.end(), suffix.begin(), suffix.end());
    EXPECT_EQ(tokenizer_->Encode(corpus_[i]["text"].get<std::string>(), true), want);
  }
}

TEST_P(TokenizerFixtureTest, VocabSizeMatchesHuggingFace) {
  EXPECT_EQ(tokenizer_->vocab_size(), expected_["vocab_size"].get<int32_t>());
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, TokenizerFixtureTest,
                         ::testing::Values("deepseek_v3", "qwen3"));

}  // namespace
}  // namespace spark::tokenizer
