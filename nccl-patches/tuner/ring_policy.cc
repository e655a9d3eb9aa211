#include "ring_policy.h"

namespace spark::nccl_tuner {

bool ParseFabric(const std::string& text, Fabric* out) {
  if (text == "ring") *out = Fabric::kRing;
  else if (text == "line") *out = Fabric::kLine;
  else if (text == "pair") *out = Fabric::kPair;
  else if (text == "switched") *out = Fabric::kSwitched;
  else return false;
  return true;
}

const char* FabricName(Fabric fabric) {
  switch (fabric) {
    case Fabric::kRing: return "ring";
    case Fabric::kLine: return "line";
    case Fabric::kPair: return "pair";
    case Fabric::kSwitched: return "switched";
    case Fabric::kUnknown: break;
  }
  return "unknown";
}

Decision Decide(Fabric fabric, Func coll, size_t bytes, const float* table, int num_algo,
                int num_proto) {
  Decision d;
  if (fabric == Fabric::kUnknown || fabric == Fabric::kSwitched) return d;
  if (coll < kBroadcast || coll > kAllReduce) return d;  // send/recv: no algorithm to pick
  if (num_algo <= kAlgoRing || num_proto <= kProtoSimple) return d;
  const float* ring = table + kAlgoRing * num_proto;
  const int wanted = bytes <= kLLMaxBytes ? kProtoLL : kProtoSimple;
  const int order[3] = {wanted, wanted == kProtoLL ? kProtoSimple : kProtoLL, kProtoLL128};
  for (int proto : order) {
    if (ring[proto] != kIgnore) {
      d.change = true;
      d.proto = proto;
      break;
    }
  }
  if (!d.change) return d;  // NCCL cannot run Ring here at all: its choice stands
  d.channels = bytes <= kLLMaxBytes ? 2 : bytes <= (size_t{1} << 20) ? 4 : 8;
  return d;
}

void Apply(const Decision& d, float* table, int num_algo, int num_proto, int* channels) {
  if (!d.change) return;
  for (int a = 0; a < num_algo; ++a) {
    for (int p = 0; p < num_proto; ++p) {
      float& cost = table[a * num_proto + p];
      if (a == d.algo && p == d.proto) {
        cost = 0.0f;
      } else if (a != d.algo) {
        cost = kIgnore;
      }
    }
  }
  if (channels != nullptr) *channels = d.channels;
}

}  // namespace spark::nccl_tuner
