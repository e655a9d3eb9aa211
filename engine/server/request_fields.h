// Which request fields the server implements, and what it does with the rest: nothing is
// silently ignored. A field the server implements is read by openai_request.cc; a field it
// accepts without effect is listed here with the reason (docs/server.md has the same table);
// a field that only makes sense with one value is accepted with that value; every other field
// is a 400 naming it. vLLM's renamed fields (guided_json, ...) are refused with the new name.
// Thread-safety: pure functions over values.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "engine/server/openai_request.h"

namespace spark::engine::server {

// The first field of `body` the server does not implement for `endpoint`, as a 400 naming it.
std::optional<ApiError> CheckRequestFields(Endpoint endpoint, const nlohmann::ordered_json& body);

// The reason a field is accepted and ignored, or "" when it is not one of those.
std::string_view IgnoredFieldReason(std::string_view field);

}  // namespace spark::engine::server
