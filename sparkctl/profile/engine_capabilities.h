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
  // Speculative decoding methods serve runs (empty: none; absent from older engines).
  std::vector<std::string> speculative_methods;
  // Environment variables the engine reads, and prefixes of those its libraries read (NCCL_).
  std::vector<std::string> env_variables, env_prefixes;

  // Every reasoning or tool-call parser a family names, in table order, without repeats.
  std::vector<std::string> Parsers() const;
  // Every KV cache element type some family keeps, in table order, without repeats.
  std::vector<std::string> KvDtypes() const;
  // Whether the engine or a library it links reads environment variable `name`.
  bool ReadsEnv(const std::string& name) const;
};

// Parses `spark-engine info --json` output; InvalidArgument naming the missing or ill-typed key
// (or the schema it does not know), mentioning `source`.
Result<EngineCapabilities> ParseEngineInfo(std::string_view json_text, const std::string& source);

// Runs `<engine_binary> info --json`. NotFound when the binary is missing (with the fix: build
// it, or pass --engine), Internal when it fails, ParseEngineInfo's errors.
Result<EngineCapabilities> QueryEngine(const std::string& engine_binary);

// What the engine makes of one checkpoint (`spark-engine info --json --model DIR --tp N`).
struct ModelCheck {
  std::string model_type;             // "" when config.json could not be read
  std::string family;
  std::vector<std::string> backends;  // those that run the family
  // Each problem the engine found, with the profile key it belongs to (model.path, engine.tp).
  std::vector<FieldError> problems;
};

// Parses the "model" object of `info --json --model ...`; InvalidArgument naming the missing key.
Result<ModelCheck> ParseModelInfo(std::string_view json_text, const std::string& source);

// Runs `<engine_binary> info --json --model dir --tp tp`; QueryEngine's errors.
Result<ModelCheck> QueryModel(const std::string& engine_binary, const std::string& dir, int tp);

// The profile against its checkpoint: the model type the engine loads, on engine.backend, split
// engine.tp ways.
void ValidateAgainstModel(const Profile& profile, const ModelCheck& model, FieldErrors* errors);

// The profile's fields against what the engine supports: engine.backend,
// engine.kv_cache.dtype, engine.speculative, engine.reasoning_parser, engine.tool_parser and the
// env entries. Each problem names the key, what the engine supports today and the fix.
void ValidateAgainstEngine(const Profile& profile, const EngineCapabilities& engine,
                           FieldErrors* errors);

}  // namespace spark::profile
