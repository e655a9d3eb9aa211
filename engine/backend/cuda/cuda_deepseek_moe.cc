// CudaDeepseekOps: routing, the routed and shared experts, and the grouped output projection.
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_deepseek_ops.h"

namespace spark::engine::backend::cuda {

void CudaDeepseekOps::GroupedLinear(const float*, int64_t, std::span<const int>, const float*, int,
                                    float*) {
  b_.Record(UnimplementedError("cuda backend: GroupedLinear is not written yet"));
}

void CudaDeepseekOps::Route(const RouteArgs&) {
  b_.Record(UnimplementedError("cuda backend: Route is not written yet"));
}

void CudaDeepseekOps::MoeExperts(const MoeExpertsArgs&) {
  b_.Record(UnimplementedError("cuda backend: MoeExperts is not written yet"));
}

}  // namespace spark::engine::backend::cuda
