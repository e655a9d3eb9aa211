// JSON text exactly as Python's json.dumps(value, ensure_ascii=False) writes it, which is what
// the `tojson` filter of Hugging Face chat templates produces: ", " and ": " separators, keys in
// their given order, non-ASCII characters kept, floats in Python's repr form.
// Thread-safety: pure function.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace spark::tokenizer {

std::string PyJsonDumps(const nlohmann::ordered_json& value);

}  // namespace spark::tokenizer
