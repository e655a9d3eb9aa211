// The speculative-decoding flags `spark-engine generate` and `serve` share: --speculative-method
// (alias --speculative) none|ngram|dspark, --num-speculative-tokens, --prompt-lookup-max and
// --prompt-lookup-min; their check (dspark only for a checkpoint with DSpark draft layers, mtp
// refused by name) and how a launcher hands them to the local rank 0 it starts. Only rank 0
// drafts (runtime/drafter.h).
// Thread-safety: plain values and pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "engine/core/model_config.h"
#include "engine/runtime/drafter.h"

namespace CLI {
class App;
}

namespace spark::engine::cli {

void AddSpeculativeFlags(CLI::App* cmd, runtime::SpeculativeOptions* options);
// The flags' check, naming the flag: Unimplemented for mtp, InvalidArgument otherwise.
Status ValidateSpeculativeFlags(const runtime::SpeculativeOptions& options);
// The same, and for dspark FailedPrecondition when the checkpoint in `model_dir` has no DSpark
// draft layers, saying what it holds (dsv41::DescribeDspark); for mtp the refusal says what the
// checkpoint holds too. A config.json that does not load adds nothing here (the model load
// reports it).
Status ValidateSpeculativeFlags(const runtime::SpeculativeOptions& options,
                                const std::string& model_dir);
// FailedPrecondition when `config` declares no DSpark draft layers, saying what it holds and
// what works instead.
Status CheckDsparkLayers(const core::ModelConfig& config);
// The flags again, for a child rank's argv (none when off).
std::vector<std::string> SpeculativeArgv(const runtime::SpeculativeOptions& options);

}  // namespace spark::engine::cli
