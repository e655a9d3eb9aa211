#include "engine/grammar/json_schema_check.h"

#include <xgrammar/grammar.h>

#include <array>
#include <exception>
#include <string>

namespace spark::engine::grammar {
namespace {

using nlohmann::ordered_json;

constexpr std::array<std::string_view, 9> kAnnotations = {
    "title",    "description", "default", "examples", "deprecated",
    "readOnly", "writeOnly",   "$comment", "$schema"};
constexpr std::array<std::string_view, 7> kTypes = {"object", "array",   "string", "number",
                                                    "integer", "boolean", "null"};
// The formats the grammar has a pattern for (xgrammar's built-in list).
constexpr std::array<std::string_view, 14> kFormats = {
    "email", "date",     "time",          "date-time",    "duration",     "ipv4",
    "ipv6",  "hostname", "uuid",          "uri",          "uri-reference", "uri-template",
    "json-pointer", "relative-json-pointer"};
// Keywords of JSON Schema that the grammar cannot enforce, and why.
struct Unsupported {
  std::string_view keyword;
  std::string_view why;
};
constexpr std::array<Unsupported, 13> kUnsupported = {{
    {"not", "a grammar cannot exclude a sub-schema"},
    {"if", "conditional schemas are not enforced"},
    {"then", "conditional schemas are not enforced"},
    {"else", "conditional schemas are not enforced"},
    {"dependentRequired", "property dependencies are not enforced"},
    {"dependentSchemas", "property dependencies are not enforced"},
    {"dependencies", "property dependencies are not enforced"},
    {"contains", "array containment is not enforced"},
    {"minContains", "array containment is not enforced"},
    {"maxContains", "array containment is not enforced"},
    {"$dynamicRef", "only local $ref (#/...) is resolved"},
    {"$recursiveRef", "only local $ref (#/...) is resolved"},
    {"$id", "schema identifiers (and references to them) are not resolved"},
}};

template <size_t N>
bool Contains(const std::array<std::string_view, N>& list, std::string_view s) {
  for (std::string_view x : list) {
    if (x == s) return true;
  }
  return false;
}

class Checker {
 public:
  Checker(const ordered_json& root, std::string_view param) : root_(root), param_(param) {}

  Status Schema(const ordered_json& node, const std::string& at) {
    if (node.is_boolean()) {
      if (!node.get<bool>() && at.empty()) return Fail(at, "the schema `false` accepts nothing");
      return Status::Ok();
    }
    if (!node.is_object()) return Fail(at, "a schema must be an object or a boolean");
    for (const auto& [key, value] : node.items()) {
      SPARK_RETURN_IF_ERROR(Keyword(node, key, value, at));
    }
    return Combination(node, at);
  }

 private:
  Status Fail(const std::string& at, const std::string& what) const {
    return InvalidArgumentError(std::string(param_) + ": at " + (at.empty() ? "/" : at) + ": " +
                                what);
  }

  Status NeedSchemaMap(const ordered_json& v, const std::string& at, const std::string& key) {
    if (!v.is_object()) return Fail(at, "\"" + key + "\" must be an object of schemas");
    for (const auto& [name, sub] : v.items()) {
      SPARK_RETURN_IF_ERROR(Schema(sub, at + "/" + key + "/" + PointerToken(name)));
    }
    return Status::Ok();
  }

  Status NeedSchemaList(const ordered_json& v, const std::string& at, const std::string& key) {
    if (!v.is_array() || v.empty()) {
      return Fail(at, "\"" + key + "\" must be a non-empty array of schemas");
    }
    for (size_t i = 0; i < v.size(); ++i) {
      SPARK_RETURN_IF_ERROR(Schema(v[i], at + "/" + key + "/" + std::to_string(i)));
    }
    return Status::Ok();
  }

  Status NeedCount(const ordered_json& v, const std::string& at, const std::string& key) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      return Fail(at, "\"" + key + "\" must be a non-negative integer");
    }
    return Status::Ok();
  }

  Status Regex(const std::string& pattern, const std::string& at, const std::string& what) {
    try {
      (void)xgrammar::Grammar::FromRegex(pattern);
    } catch (const std::exception& e) {
      return Fail(at, what + " \"" + pattern + "\" is not a regular expression the grammar " +
                          "supports: " + FirstLine(e.what()));
    }
    return Status::Ok();
  }

  static std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

  Status Type(const ordered_json& v, const std::string& at) {
    auto known = [](const ordered_json& t) {
      return t.is_string() && Contains(kTypes, t.get<std::string>());
    };
    if (known(v)) return Status::Ok();
    if (v.is_array() && !v.empty()) {
      for (const ordered_json& t : v) {
        if (!known(t)) return Fail(at, "\"type\" " + t.dump() + " is not a JSON Schema type");
      }
      return Status::Ok();
    }
    return Fail(at, "\"type\" " + v.dump() +
                        " is not a JSON Schema type (object, array, string, number, integer, "
                        "boolean, null, or a list of them)");
  }

  Status Ref(const ordered_json& v, const std::string& at) {
    if (!v.is_string()) return Fail(at, "\"$ref\" must be a string");
    const std::string ref = v.get<std::string>();
    if (!ref.starts_with("#")) {
      return Fail(at, "\"$ref\" \"" + ref +
                          "\": only references inside the schema (#/$defs/...) are resolved");
    }
    try {
      const ordered_json::json_pointer p(ref.substr(1));
      if (!root_.contains(p)) return Fail(at, "\"$ref\" \"" + ref + "\" points at nothing");
    } catch (const std::exception&) {
      return Fail(at, "\"$ref\" \"" + ref + "\" is not a JSON Pointer");
    }
    return Status::Ok();
  }

  Status Keyword(const ordered_json& node, const std::string& key, const ordered_json& v,
                 const std::string& at) {
    if (Contains(kAnnotations, key) || key.starts_with("x-")) return Status::Ok();
    for (const Unsupported& u : kUnsupported) {
      if (u.keyword == key) {
        return Fail(at, "keyword \"" + key + "\" is not supported by structured output (" +
                            std::string(u.why) + "); remove it or check it after the reply");
      }
    }
    if (key == "type") return Type(v, at);
    if (key == "properties" || key == "patternProperties" || key == "$defs" ||
        key == "definitions") {
      SPARK_RETURN_IF_ERROR(NeedSchemaMap(v, at, key));
      if (key == "patternProperties") {
        for (const auto& [pattern, sub] : v.items()) {
          SPARK_RETURN_IF_ERROR(Regex(pattern, at + "/patternProperties", "the pattern"));
        }
      }
      return Status::Ok();
    }
    if (key == "additionalProperties" || key == "unevaluatedProperties" ||
        key == "propertyNames" || key == "unevaluatedItems") {
      return Schema(v, at + "/" + key);
    }
    if (key == "items") {
      if (v.is_array()) {
        return Fail(at, "\"items\" as a list is the old tuple form; write \"prefixItems\"");
      }
      return Schema(v, at + "/items");
    }
    if (key == "prefixItems" || key == "anyOf" || key == "oneOf" || key == "allOf") {
      return NeedSchemaList(v, at, key);
    }
    if (key == "required") {
      if (!v.is_array()) return Fail(at, "\"required\" must be a list of property names");
      for (const ordered_json& name : v) {
        if (!name.is_string()) return Fail(at, "\"required\" must be a list of property names");
      }
      return Status::Ok();
    }
    if (key == "enum") {
      if (!v.is_array() || v.empty()) return Fail(at, "\"enum\" must be a non-empty list");
      return Status::Ok();
    }
    if (key == "const") return Status::Ok();
    if (key == "$ref") return Ref(v, at);
    if (key == "minLength" || key == "maxLength" || key == "minItems" || key == "maxItems" ||
        key == "minProperties" || key == "maxProperties") {
      return NeedCount(v, at, key);
    }
    if (key == "minimum" || key == "maximum" || key == "exclusiveMinimum" ||
        key == "exclusiveMaximum") {
      if (!v.is_number()) return Fail(at, "\"" + key + "\" must be a number");
      return Status::Ok();
    }
    if (key == "multipleOf") {
      const bool integer = node.contains("type") && node["type"] == "integer";
      if (!v.is_number() || v.get<double>() <= 0) {
        return Fail(at, "\"multipleOf\" must be a number above 0");
      }
      if (!integer || !v.is_number_integer()) {
        return Fail(at, "keyword \"multipleOf\" is supported only as a whole number on "
                        "\"type\": \"integer\"");
      }
      return Status::Ok();
    }
    if (key == "uniqueItems") {
      if (v == false) return Status::Ok();
      return Fail(at, "keyword \"uniqueItems\" is not supported by structured output (items are "
                      "not compared); remove it or check it after the reply");
    }
    if (key == "pattern") {
      if (!v.is_string()) return Fail(at, "\"pattern\" must be a string");
      return Regex(v.get<std::string>(), at, "the pattern");
    }
    if (key == "format") {
      if (!v.is_string() || !Contains(kFormats, v.get<std::string>())) {
        std::string known;
        for (std::string_view f : kFormats) known += (known.empty() ? "" : ", ") + std::string(f);
        return Fail(at, "\"format\" " + v.dump() + " is not supported (supported: " + known + ")");
      }
      return Status::Ok();
    }
    return Fail(at, "keyword \"" + key +
                        "\" is not a JSON Schema keyword structured output knows; remove it "
                        "(annotations may use an \"x-\" prefix)");
  }

  // Combinations the grammar would enforce differently than the schema says.
  Status Combination(const ordered_json& node, const std::string& at) {
    const bool lengths = node.contains("minLength") || node.contains("maxLength");
    if (lengths && (node.contains("pattern") || node.contains("format"))) {
      return Fail(at, std::string("\"minLength\"/\"maxLength\" beside \"") +
                          (node.contains("pattern") ? "pattern" : "format") +
                          "\" are not enforced together; fold the length into the pattern "
                          "(e.g. ^[a-z]{2,8}$)");
    }
    return Status::Ok();
  }

  const ordered_json& root_;
  const std::string_view param_;
};

}  // namespace

std::string PointerToken(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

Status CheckJsonSchema(const nlohmann::ordered_json& schema, std::string_view param) {
  return Checker(schema, param).Schema(schema, "");
}

}  // namespace spark::engine::grammar
