// Unit tests on a tiny synthetic byte-level tokenizer: malformed files, merges, added tokens,
// streaming decode and the UTF-8 helpers.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/stream_decoder.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_spec.h"
#include "engine/tokenizer/utf8.h"

namespace spark::tokenizer {
namespace {

using nlohmann::json;

// Ids 0..255: the bytes; 256 "ab", 257 "abc", 258 "Ġa"; added: 300 "<s>", 301 "<sp>".
json TinyTokenizerJson() {
  ByteLevelAlphabet alphabet;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[alphabet.CharOf(static_cast<uint8_t>(b))] = b;
  vocab["ab"] = 256;
  vocab["abc"] = 257;
  vocab["Ġa"] = 258;
  return json{
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b", "ab c", "Ġ a"}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens",
       {{{"id", 300}, {"content", "<s>"}, {"special", true}},
        {{"id", 301}, {"content", "<sp>"}, {"special", true}}}},
  };
}

Result<Tokenizer> Load(const json& j) {
  TokenizerSpec spec;
  SPARK_RETURN_IF_ERROR(ParseTokenizerJson(j.dump(), "tiny/tokenizer.json", spec));
  return Tokenizer::FromSpec(spec);
}

TEST(TokenizerTest, AppliesMergesAndAddedTokensLongestFirst) {
  Result<Tokenizer> t = Load(TinyTokenizerJson());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // "abc" | " ab" | " a": GPT-2 split; "Ġ ab" has no merge, "Ġ a" has.
  EXPECT_EQ(t->Encode("abc ab a"), (std::vector<int32_t>{257, 32, 256, 258}));
  EXPECT_EQ(t->Encode("x<sp>y<s>"), (std::vector<int32_t>{'x', 301, 'y', 300}));
  EXPECT_EQ(t->EncodePlain("<s>").size(), 3u);
  EXPECT_EQ(t->Decode(std::vector<int32_t>{257, 300, 258}), "abc<s> a");
  EXPECT_EQ(t->TokenToId("Ġa"), 258);
  EXPECT_EQ(t->TokenToId("<sp>"), 301);
  EXPECT_EQ(t->IdToToken(301), "<sp>");
  EXPECT_TRUE(t->IsSpecial(300));
  EXPECT_FALSE(t->IsValidId(299));
  EXPECT_EQ(t->vocab_size(), 302);
}

struct MalformedCase {
  const char* name;
  void (*mutate)(json&);
  const char* expected_key;
};

class MalformedTokenizerTest : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(MalformedTokenizerTest, ErrorNamesFileAndKey) {
  json j = TinyTokenizerJson();
  GetParam().mutate(j);
  Result<Tokenizer> t = Load(j);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("tokenizer.json"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find(GetParam().expected_key), std::string::npos)
      << t.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MalformedTokenizerTest,
    ::testing::Values(
        MalformedCase{"NoModel", [](json& j) { j.erase("model"); }, "model: missing key"},
        MalformedCase{"ModelType", [](json& j) { j["model"]["type"] = "Unigram"; }, "model.type"},
        MalformedCase{"VocabId", [](json& j) { j["model"]["vocab"]["ab"] = "x"; }, "model.vocab"},
        MalformedCase{"MergeShape", [](json& j) { j["model"]["merges"][1] = 7; }, "model.merges[1]"},
        MalformedCase{"MergeUnknown", [](json& j) { j["model"]["merges"][2] = "c d"; },
                      "model.merges[2]"},
        MalformedCase{"MissingByte", [](json& j) { j["model"]["vocab"].erase("!"); }, "model.vocab"},
        MalformedCase{"Normalizer", [](json& j) { j["normalizer"] = {{"type", "Lowercase"}}; },
                      "normalizer.type"},
        MalformedCase{"Regex", [](json& j) {
                        j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(("}}},
                                              {"behavior", "Isolated"}};
                      }, "pre_tokenizer"},
        MalformedCase{"AddedId", [](json& j) { j["added_tokens"][0]["id"] = -1; },
                      "added_tokens[0].id"},
        MalformedCase{"Decoder", [](json& j) { j["decoder"] = {{"type", "WordPiece"}}; },
                      "decoder.type"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(TokenizerTest, NotJsonAndMissingDirAreClear) {
  TokenizerSpec spec;
  Status s = ParseTokenizerJson("{not json", "x/tokenizer.json", spec);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("x/tokenizer.json"), std::string::npos);
  Result<Tokenizer> t = Tokenizer::FromDir("/nonexistent-dir");
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("tokenizer.json"), std::string::npos);
}

TEST(StreamDecoderTest, HoldsBackSplitCharacters) {
  Result<Tokenizer> t = Load(TinyTokenizerJson());
  ASSERT_TRUE(t.ok());
  StreamDecoder stream(*t);
  // "é" = C3 A9 and "😀" = F0 9F 98 80, one byte token each.
  EXPECT_EQ(stream.Push(0xC3), "");
  EXPECT_EQ(stream.Push(0xA9), "é");
  EXPECT_EQ(stream.Push(0xF0), "");
  EXPECT_EQ(stream.Push(0x9F), "");
  EXPECT_EQ(stream.Push(0x98), "");
  EXPECT_EQ(stream.pending_bytes(), 3u);
  EXPECT_EQ(stream.Push(0x80), "😀");
  EXPECT_EQ(stream.Push(0xE4), "");
  EXPECT_EQ(stream.Push('x'), "\xEF\xBF\xBDx");  // a character that never completes
  EXPECT_EQ(stream.Push(0xE4), "");
  EXPECT_EQ(stream.Flush(), "\xEF\xBF\xBD");
}

TEST(Utf8Test, LossyReplacesMaximalSubparts) {
  EXPECT_EQ(Utf8Lossy("a\xF0\x9F\x98z"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(Utf8Lossy("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(Utf8Lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(Utf8EmittablePrefix("ab\xE4\xB8"), 2u);
  EXPECT_TRUE(IsValidUtf8("日本"));
  EXPECT_FALSE(IsValidUtf8("\xFF"));
}

}  // namespace
}  // namespace spark::tokenizer
