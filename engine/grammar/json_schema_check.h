// CheckJsonSchema: refuses, by name and place, what structured output would not enforce. The
// grammar library (xgrammar) turns a JSON Schema into a grammar but drops some keywords with no
// more than a log line (`not`, `if`, `uniqueItems`, `multipleOf` on numbers, lengths beside a
// pattern, unknown formats); a request that relies on them would get output that breaks its
// schema. This walk runs first and answers with the JSON Pointer of the node and the keyword:
//   response_format.json_schema.schema: at /properties/tags: keyword "uniqueItems" is not
//   supported by structured output (...)
// docs/structured-output.md lists what is supported.
// Thread-safety: a pure function.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "base/status.h"

namespace spark::engine::grammar {

// InvalidArgument naming `param` (the request field that holds the schema), the JSON Pointer
// inside it and the fix; Ok when every keyword is one the grammar enforces or an annotation.
Status CheckJsonSchema(const nlohmann::ordered_json& schema, std::string_view param);

// A JSON Pointer token (RFC 6901: "~" -> "~0", "/" -> "~1").
std::string PointerToken(std::string_view key);

}  // namespace spark::engine::grammar
