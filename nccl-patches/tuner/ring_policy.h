// The ring policy of the Spark tuner plugin (tuner_plugin.cc), apart from NCCL's ABI so tests
// call it directly. On point-to-point fabrics (switchless ring, line, pair) NCCL must use the
// Ring algorithm: Tree and PAT want connections between non-adjacent ranks, which a ring of DAC
// cables has only through the neighbours' kernels (QP timeouts were seen on 4-rings when NCCL
// chose), so every other algorithm's cost becomes "ignore". The protocol goes by size: LL up to
// kLLMaxBytes (latency: decode's all-reduces), Simple above (bandwidth); LL128 never (field
// deployments run NCCL_PROTO=^LL128 to save its buffers, and it is not used here either). The
// channels go by size too, in multiples of the two ConnectX twins of a port: 2 up to 64 KiB, 4
// up to 1 MiB, 8 above (NCCL_MAX_NCHANNELS=8 in the field). Where NCCL marks the wanted
// protocol unavailable, the next in LL, Simple, LL128 order is taken. On a switched fabric
// NCCL's own model is left alone. A tuner cannot stop NCCL from setting Tree/PAT up at init:
// NCCL_ALGO=Ring stays in the environment (netplan) for that.
// Pure; no I/O. Thread-safety: functions.
#pragma once

#include <cstddef>
#include <string>

#include "nccl_tuner_abi.h"

namespace spark::nccl_tuner {

enum class Fabric { kUnknown, kRing, kLine, kPair, kSwitched };

inline constexpr size_t kLLMaxBytes = 64 << 10;

// "ring", "line", "pair", "switched"; false for anything else (including empty).
bool ParseFabric(const std::string& text, Fabric* out);
const char* FabricName(Fabric fabric);

struct Decision {
  bool change = false;  // false: leave NCCL's choice
  int algo = kAlgoRing;
  int proto = kProtoLL;
  int channels = 0;
};

// table: float[num_algo][num_proto] as NCCL passes it (entries of kIgnore are unavailable).
Decision Decide(Fabric fabric, Func coll, size_t bytes, const float* table, int num_algo,
                int num_proto);
// Writes the decision: the chosen entry becomes 0 (cheapest), every other algorithm's entries
// kIgnore; `channels` is set. Nothing when !decision.change.
void Apply(const Decision& decision, float* table, int num_algo, int num_proto, int* channels);

}  // namespace spark::nccl_tuner
