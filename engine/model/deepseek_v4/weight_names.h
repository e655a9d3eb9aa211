// The one mapping between DeepSeek-V4 tensor namings: the released checkpoint's names (the
// canonical form used in code and errors) and transformers' module names. A checkpoint may use
// either, and either under a "model." prefix (transformers' save_pretrained writes the released
// leaf names under "model.").
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

namespace spark::engine::model::dsv4 {

// The names under which the tensor with released name `canonical` (for example
// "layers.3.attn.wq_a.weight" or "embed.weight") may be stored, most likely first.
std::vector<std::string> CandidateNames(const std::string& canonical);

// True for tensors a checkpoint may carry that the forward pass does not use (the multi-token
// prediction layers "mtp.*").
bool IsIgnoredTensor(const std::string& name);

}  // namespace spark::engine::model::dsv4
