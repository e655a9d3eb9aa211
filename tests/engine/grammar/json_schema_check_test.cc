#include "engine/grammar/json_schema_check.h"

#include <gtest/gtest.h>

#include <string>

namespace spark::engine::grammar {
namespace {

using nlohmann::ordered_json;

Status Check(const std::string& schema) {
  return CheckJsonSchema(ordered_json::parse(schema), "response_format.json_schema.schema");
}

TEST(JsonSchemaCheckTest, AcceptsWhatTheGrammarEnforces) {
  for (const char* schema : {
           R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
               "age": {"type": "integer", "minimum": 0, "maximum": 150, "multipleOf": 1},
               "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
               "required": ["name"], "additionalProperties": false,
               "title": "Person", "description": "x", "x-origin": "pydantic"})",
           R"({"$defs": {"P": {"type": "object", "properties": {"x": {"type": "number"}}}},
               "anyOf": [{"$ref": "#/$defs/P"}, {"type": "null"}]})",
           R"({"type": ["string", "null"], "format": "date-time"})",
           R"({"type": "string", "pattern": "^[a-z]{2,8}$"})",
           R"({"prefixItems": [{"type": "integer"}, {"const": "x"}], "uniqueItems": false})",
           R"(true)",
       }) {
    EXPECT_TRUE(Check(schema).ok()) << schema << ": " << Check(schema).message();
  }
}

struct Refusal {
  const char* schema;
  const char* expected;  // a piece of the message: where and what
};

class JsonSchemaRefusalTest : public testing::TestWithParam<Refusal> {};

TEST_P(JsonSchemaRefusalTest, NamesThePathAndTheKeyword) {
  const Status s = Check(GetParam().schema);
  ASSERT_FALSE(s.ok()) << GetParam().schema;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("response_format.json_schema.schema: at "), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find(GetParam().expected), std::string::npos) << s.message();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, JsonSchemaRefusalTest,
    testing::Values(
        Refusal{R"({"type": "object", "properties": {"tags": {"type": "array",
                   "uniqueItems": true}}})",
                "at /properties/tags: keyword \"uniqueItems\""},
        Refusal{R"({"not": {"type": "string"}})", "at /: keyword \"not\""},
        Refusal{R"({"properties": {"a/b": {"if": {}, "then": {}}}})",
                "at /properties/a~1b: keyword \"if\""},
        Refusal{R"({"type": "number", "multipleOf": 0.5})", "keyword \"multipleOf\""},
        Refusal{R"({"type": "string", "format": "credit-card"})", "\"format\" \"credit-card\""},
        Refusal{R"({"type": "string", "pattern": "^a+$", "maxLength": 3})",
                "\"minLength\"/\"maxLength\" beside \"pattern\""},
        Refusal{R"({"anyOf": [{"$ref": "#/$defs/Missing"}]})",
                "at /anyOf/0: \"$ref\" \"#/$defs/Missing\" points at nothing"},
        Refusal{R"({"$ref": "https://example.com/s.json"})", "only references inside"},
        Refusal{R"({"type": "object", "discriminator": {"propertyName": "kind"}})",
                "keyword \"discriminator\" is not a JSON Schema keyword"},
        Refusal{R"({"type": "text"})", "\"type\" \"text\" is not a JSON Schema type"},
        Refusal{R"({"items": [{"type": "string"}]})", "write \"prefixItems\""},
        Refusal{R"({"type": "string", "pattern": "(unclosed"})", "the pattern \"(unclosed\""},
        Refusal{R"({"type": "array", "contains": {"type": "integer"}})",
                "keyword \"contains\""},
        Refusal{R"(false)", "accepts nothing"},
        Refusal{R"(42)", "a schema must be an object or a boolean"}));

TEST(JsonSchemaCheckTest, PointerTokensEscapeSlashAndTilde) {
  EXPECT_EQ(PointerToken("a/b~c"), "a~1b~0c");
}

}  // namespace
}  // namespace spark::engine::grammar
