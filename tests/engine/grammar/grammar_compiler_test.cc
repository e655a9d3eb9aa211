// The grammar path over the real Qwen3 vocabulary (151,936 logit rows): compiled requests walked
// token by token, each step drawing a random token the mask allows, must produce text that the
// request accepts; disallowed tokens are refused; rollback restores the masks.
#include "engine/grammar/grammar_compiler.h"

#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "engine/tokenizer/tokenizer.h"

namespace spark::engine::grammar {
namespace {

using nlohmann::ordered_json;
using Kind = ConstraintRequest::Kind;

constexpr int kQwenRows = 151936;
constexpr int32_t kImEnd = 151645;

const tokenizer::Tokenizer& Qwen3() {
  static const tokenizer::Tokenizer* tok = [] {
    auto t = tokenizer::Tokenizer::FromDir(SPARK_SHARED_DIR "/data/tokenizers/qwen3");
    return t.ok() ? new tokenizer::Tokenizer(std::move(*t)) : nullptr;
  }();
  return *tok;
}

GrammarVocabulary QwenVocabulary() {
  const tokenizer::Tokenizer& tok = Qwen3();
  GrammarVocabulary v;
  v.tokens.resize(tok.vocab_size());
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.IsValidId(id) && !tok.IsAdded(id)) v.tokens[id] = tok.TokenBytes(id);
  }
  v.vocab_size = kQwenRows;
  v.stop_ids = {kImEnd, 151643};
  return v;
}

class GrammarCompilerTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(SPARK_SHARED_DIR "/data/tokenizers/qwen3/tokenizer.json")) return;
    auto c = GrammarCompiler::Create(QwenVocabulary(), 2);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    compiler_ = std::move(*c).release();
  }
  void SetUp() override {
    if (compiler_ == nullptr) GTEST_SKIP() << "no Qwen3 tokenizer in ../shared/data";
  }

  // Draws allowed tokens at random (a stop token as soon as one is allowed) until the grammar
  // terminates; returns the text. Fails the test when a step allows nothing.
  static std::string Walk(const runtime::ConstraintSpec& spec, uint64_t seed, int max_steps = 400) {
    auto c = spec.NewConstraint();
    EXPECT_TRUE(c.ok());
    std::mt19937_64 rng(seed);
    std::vector<uint32_t> mask(runtime::MaskWords(kQwenRows));
    std::string text;
    for (int step = 0; step < max_steps && !(*c)->IsTerminated(); ++step) {
      EXPECT_TRUE((*c)->FillNextTokenMask(mask).ok());
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < kQwenRows; ++t) {
        if (runtime::MaskAllows(mask, t)) allowed.push_back(t);
      }
      if (allowed.empty()) {
        ADD_FAILURE() << "nothing allowed after \"" << text << "\"";
        return text;
      }
      int32_t pick = allowed[rng() % allowed.size()];
      if (runtime::MaskAllows(mask, kImEnd)) pick = kImEnd;
      EXPECT_TRUE((*c)->Accept(pick).ok());
      if (pick != kImEnd) text += Qwen3().TokenBytes(pick);
    }
    EXPECT_TRUE((*c)->IsTerminated()) << "not done after " << max_steps << " tokens: " << text;
    return text;
  }

  Result<std::shared_ptr<const runtime::ConstraintSpec>> Compile(const ConstraintRequest& r) {
    return compiler_->Compile(r);
  }

  static GrammarCompiler* compiler_;
};

GrammarCompiler* GrammarCompilerTest::compiler_ = nullptr;

TEST_F(GrammarCompilerTest, JsonSchemaWalksYieldValidDocuments) {
  ConstraintRequest r;
  r.kind = Kind::kJsonSchema;
  r.param = "response_format.json_schema.schema";
  r.any_whitespace = false;
  r.schema = ordered_json::parse(R"({
      "type": "object",
      "properties": {"city": {"enum": ["Paris", "Oslo"]}, "ok": {"type": "boolean"},
                     "n": {"type": "integer", "minimum": 1, "maximum": 9},
                     "tag": {"type": "string", "pattern": "^[a-z]{1,4}$"}},
      "required": ["city", "ok", "n", "tag"], "additionalProperties": false})");
  auto spec = Compile(r);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const std::string text = Walk(**spec, seed);
    const ordered_json j = ordered_json::parse(text, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << text;
    EXPECT_EQ(j.size(), 4u) << text;
    EXPECT_TRUE(j["city"] == "Paris" || j["city"] == "Oslo") << text;
    EXPECT_TRUE(j["ok"].is_boolean()) << text;
    EXPECT_TRUE(j["n"].is_number_integer() && j["n"] >= 1 && j["n"] <= 9) << text;
    EXPECT_TRUE(std::regex_match(j["tag"].get<std::string>(), std::regex("[a-z]{1,4}"))) << text;
  }
}

TEST_F(GrammarCompilerTest, RegexChoiceAndEbnf) {
  ConstraintRequest regex;
  regex.kind = Kind::kRegex;
  regex.param = "structured_outputs.regex";
  regex.text = "[0-9]{3}-[A-Z]{2}";
  ConstraintRequest choice;
  choice.kind = Kind::kChoice;
  choice.param = "structured_outputs.choice";
  choice.choices = {"yes", "no", "say \"maybe\"\n"};
  ConstraintRequest ebnf;
  ebnf.kind = Kind::kGrammar;
  ebnf.param = "structured_outputs.grammar";
  ebnf.text = "root ::= \"(\" num (\"+\" num)* \")\"\nnum ::= [1-9]";
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    auto s = Compile(regex);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const std::string r = Walk(**s, seed);
    EXPECT_TRUE(std::regex_match(r, std::regex("[0-9]{3}-[A-Z]{2}"))) << r;
    s = Compile(choice);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const std::string c = Walk(**s, seed);
    EXPECT_TRUE(c == "yes" || c == "no" || c == "say \"maybe\"\n") << c;
    s = Compile(ebnf);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const std::string e = Walk(**s, seed, 80);
    EXPECT_TRUE(std::regex_match(e, std::regex("\\([1-9](\\+[1-9])*\\)"))) << e;
  }
}

TEST_F(GrammarCompilerTest, ToolCallFormsWriteOneOfTheTools) {
  ConstraintRequest r;
  r.kind = Kind::kToolCall;
  r.param = "tool_choice";
  r.any_whitespace = false;
  for (const char* name : {"get_weather", "now"}) {
    ToolCallForm f;
    f.prefix = std::string(name) + "\", \"arguments\": ";
    f.parameters = ordered_json::parse(
        std::string(name) == "now"
            ? R"({"type": "object", "properties": {}})"
            : R"({"type": "object", "properties": {"city": {"enum": ["Paris"]}},
                 "required": ["city"]})");
    f.parameters_param = "tools[0].function.parameters";
    f.suffix = "}";
    r.calls.push_back(f);
  }
  auto spec = Compile(r);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const std::string text = Walk(**spec, seed);
    // The prefill before it was <tool_call>\n{"name": " ; together a whole call object.
    const ordered_json call = ordered_json::parse("{\"name\": \"" + text, nullptr, false);
    ASSERT_FALSE(call.is_discarded()) << text;
    if (call["name"] == "get_weather") {
      EXPECT_EQ(call["arguments"], ordered_json::parse(R"({"city": "Paris"})")) << text;
    } else {
      EXPECT_EQ(call["name"], "now") << text;
      EXPECT_EQ(call["arguments"], ordered_json::object()) << text;
    }
  }
}

TEST_F(GrammarCompilerTest, RefusesDisallowedTokensAndRollsBack) {
  ConstraintRequest r;
  r.kind = Kind::kChoice;
  r.param = "structured_outputs.choice";
  r.choices = {"abc", "abd"};
  auto spec = Compile(r);
  ASSERT_TRUE(spec.ok());
  auto c = (*spec)->NewConstraint();
  ASSERT_TRUE(c.ok());
  const std::vector<int32_t> x = Qwen3().Encode("x");
  ASSERT_EQ(x.size(), 1u);
  const Status refused = (*c)->Accept(x[0]);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  std::vector<uint32_t> before(runtime::MaskWords(kQwenRows)), after(before.size());
  ASSERT_TRUE((*c)->FillNextTokenMask(before).ok());
  const std::vector<int32_t> a = Qwen3().Encode("a");
  ASSERT_EQ(a.size(), 1u);
  ASSERT_TRUE((*c)->Accept(a[0]).ok());
  ASSERT_TRUE((*c)->FillNextTokenMask(after).ok());
  EXPECT_NE(before, after);
  ASSERT_TRUE((*c)->Rollback(1).ok());
  ASSERT_TRUE((*c)->FillNextTokenMask(after).ok());
  EXPECT_EQ(before, after);
  EXPECT_EQ((*c)->Rollback(1).code(), StatusCode::kInvalidArgument);
}

TEST_F(GrammarCompilerTest, BadRequestsNameTheirField) {
  ConstraintRequest regex;
  regex.kind = Kind::kRegex;
  regex.param = "structured_outputs.regex";
  regex.text = "[a-";
  auto s = Compile(regex);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message().rfind("structured_outputs.regex: ", 0), 0u) << s.status().message();
  ConstraintRequest ebnf;
  ebnf.kind = Kind::kGrammar;
  ebnf.param = "structured_outputs.grammar";
  ebnf.text = "root ::= missing_rule";
  s = Compile(ebnf);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message().rfind("structured_outputs.grammar: ", 0), 0u)
      << s.status().message();
  ConstraintRequest tool;
  tool.kind = Kind::kToolCall;
  tool.param = "tool_choice";
  ToolCallForm f;
  f.parameters = ordered_json::parse(R"({"type": "object", "properties": {"x": {"not": {}}}})");
  f.parameters_param = "tools[2].function.parameters";
  tool.calls.push_back(f);
  s = Compile(tool);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("tools[2].function.parameters: at /properties/x: keyword "
                                      "\"not\""),
            std::string::npos)
      << s.status().message();
}

TEST(EbnfLiteralTest, EscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(EbnfLiteral("a\"b\\c\nd"), "\"a\\\"b\\\\c\\u000ad\"");
}

}  // namespace
}  // namespace spark::engine::grammar
