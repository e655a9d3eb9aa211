// The one mapping between DeepSeek-V4.1 tensor namings: the released checkpoint's names (the
// canonical form used in code and errors: "layers.3.attn.wq_a.weight", "embed.weight",
// "head.weight") and transformers' (the same leaves under "model.", "lm_head.weight"), plus the
// tensors a checkpoint carries that the text forward pass does not use: the DSpark draft layers
// (mtp.*, kept for speculative decoding), the vision tower (vision.*), the aligner (aligner.*)
// and the image delimiter embeddings (image_start, image_end, image_newline).
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "engine/model/deepseek_v4/tensor_loader.h"

namespace spark::engine::model::dsv41 {

// The names under which the tensor with released name `canonical` may be stored, most likely
// first.
std::vector<std::string> CandidateNames(const std::string& canonical);

// True for the mtp.*, vision.*, aligner.* and image_* tensors (with or without "model.").
bool IsIgnoredTensor(const std::string& name);

// Both, as the loader takes them.
dsv4::TensorNaming V41Naming();

}  // namespace spark::engine::model::dsv41
