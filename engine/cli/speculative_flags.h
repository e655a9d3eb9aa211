// The speculative-decoding flags `spark-engine generate` and `serve` share: --speculative-method
// (alias --speculative) none|ngram|dspark, --num-speculative-tokens, --prompt-lookup-max and
// --prompt-lookup-min; their check (dspark refused by name: not implemented yet) and how a
// launcher hands them to the local rank 0 it starts. Only rank 0 drafts (runtime/drafter.h).
// Thread-safety: plain values and pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "engine/runtime/drafter.h"

namespace CLI {
class App;
}

namespace spark::engine::cli {

void AddSpeculativeFlags(CLI::App* cmd, runtime::SpeculativeOptions* options);
// The flags' check, naming the flag: Unimplemented for dspark, InvalidArgument otherwise.
Status ValidateSpeculativeFlags(const runtime::SpeculativeOptions& options);
// The same, and for dspark (and mtp) the refusal also says what the checkpoint in `model_dir`
// holds (dsv41::DescribeDspark), e.g. "checkpoint has 3 DSpark draft layers (...);
// spark-engine does not run them yet". A config.json that does not load adds nothing here (the
// model load reports it).
Status ValidateSpeculativeFlags(const runtime::SpeculativeOptions& options,
                                const std::string& model_dir);
// The flags again, for a child rank's argv (none when off).
std::vector<std::string> SpeculativeArgv(const runtime::SpeculativeOptions& options);

}  // namespace spark::engine::cli
