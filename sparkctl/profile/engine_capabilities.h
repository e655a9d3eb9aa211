// EngineCapabilities: what a spark-engine build supports, as `spark-engine info --json` reports
// it (schema spark-engine-info/v1): its backends, its model families (model types, backends,
// element types, chat format and parsers) and its chat formats. Profile checks validate the
// engine fields of a profile against it instead of keeping their own lists, so sparkctl and the
// engine it deploys cannot disagree.
// Thread-safety: plain values and pure functions (QueryEngine starts a process).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/field_errors.h"
#include "base/status.h"
#include "sparkctl/profile/profile.h"

namespace spark::profile {

struct EngineFamily {
  std::string name;
  std::vector<std::string> model_types, backends, weight_dtypes, kv_dtypes;
  std::string chat_format, reasoning_parser, tool_parser;
};

struct EngineCapabilities {
  std::string source;  // the binary asked, for messages
  std::string version;
  std::vector<std::string> backends;
  std::vector<EngineFamily> families;
  std::vector<std::string> chat_formats;

  // Every reasoning or tool-call parser a family names, in table order, without repeats.
  std::vector<std::string> Parsers() const;
};

// Parses `spark-engine info --json` output; InvalidArgument naming the missing or ill-typed key
// (or the schema it does not know), mentioning `source`.
Result<EngineCapabilities> ParseEngineInfo(std::string_view json_text, const std::string& source);

// Runs `<engine_binary> info --json`. NotFound when the binary is missing (with the fix: build
// it, or pass --engine), Internal when it fails, ParseEngineInfo's errors.
Result<EngineCapabilities> QueryEngine(const std::string& engine_binary);

// The profile's engine fields against what the engine supports: engine.backend,
// engine.reasoning_parser and engine.tool_parser. Each problem names the key and the choices.
void ValidateAgainstEngine(const Profile& profile, const EngineCapabilities& engine,
                           FieldErrors* errors);

}  // namespace spark::profile
