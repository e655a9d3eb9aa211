// libnccl-tuner-spark.so: NCCL's tuner plugin for DGX Spark fabrics (ring_policy.h). NCCL loads
// it when NCCL_TUNER_PLUGIN names it; it exports the v7, v6 and v5 entry points, so NCCL 2.28
// and later find one. The fabric comes from SPARK_NCCL_TOPOLOGY (ring, line, pair, switched:
// what `sparkctl net plan` calls the cluster); unset, the plugin changes nothing and says so;
// any other value fails NCCL's init naming the variable (nothing is silently ignored).
// Decisions are logged once per collective and size class through NCCL's logger (NCCL_DEBUG=INFO
// NCCL_DEBUG_SUBSYS=TUNING shows them next to NCCL's own choice).
// This library reads its own environment variable: it is NCCL's plugin, outside the engine's
// configuration layer, and NCCL plugins are configured that way.
// Thread-safety: NCCL may call one context from several threads; the log set is locked.
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "nccl_tuner_abi.h"
#include "ring_policy.h"

namespace spark::nccl_tuner {
namespace {

constexpr char kName[] = "SparkRing";
constexpr char kTopologyVar[] = "SPARK_NCCL_TOPOLOGY";

struct Context {
  Fabric fabric = Fabric::kUnknown;
  size_t ranks = 0;
  size_t nodes = 0;
  Logger log = nullptr;
  std::mutex mu;
  std::set<std::pair<int, int>> logged;  // (collective, log2 of the size)
};

const char* FuncName(Func f) {
  switch (f) {
    case kBroadcast: return "Broadcast";
    case kReduce: return "Reduce";
    case kAllGather: return "AllGather";
    case kReduceScatter: return "ReduceScatter";
    case kAllReduce: return "AllReduce";
  }
  return "other";
}

const char* ProtoName(int p) { return p == kProtoLL ? "LL" : p == kProtoLL128 ? "LL128" : "Simple"; }

int Log2(size_t bytes) {
  int n = 0;
  while (bytes > 1) {
    bytes >>= 1;
    ++n;
  }
  return n;
}

Result Init(void** context, size_t ranks, size_t nodes, Logger log) {
  const char* value = std::getenv(kTopologyVar);
  Fabric fabric = Fabric::kUnknown;
  if (value != nullptr && *value != '\0' && !ParseFabric(value, &fabric)) {
    if (log) {
      log(kLogWarn, kLogInit | kLogEnv, __FILE__, __LINE__,
          "%s tuner: %s=%s is not a fabric: use ring, line, pair or switched (or unset it)", kName,
          kTopologyVar, value);
    }
    return kInvalidArgument;
  }
  auto* c = new Context();
  c->fabric = fabric;
  c->ranks = ranks;
  c->nodes = nodes;
  c->log = log;
  *context = c;
  if (log) {
    const bool p2p = fabric != Fabric::kUnknown && fabric != Fabric::kSwitched;
    log(kLogInfo, kLogInit | kLogTuning, __FILE__, __LINE__,
        "%s tuner: %s fabric, %zu ranks on %zu nodes: %s", kName, FabricName(fabric), ranks, nodes,
        p2p ? "Ring only; LL up to 64 KiB, then Simple; 2/4/8 channels by size"
            : value == nullptr || *value == '\0'
                ? "SPARK_NCCL_TOPOLOGY unset: NCCL's own choices"
                : "switched fabric: NCCL's own choices");
  }
  return kSuccess;
}

Result InitV5(void** context, uint64_t, size_t ranks, size_t nodes, Logger log, NvlDomainInfo*,
              ConstantsV5*) {
  return Init(context, ranks, nodes, log);
}

Result InitV7(void** context, uint64_t, size_t ranks, size_t nodes, Logger log, NvlDomainInfo*,
              ConstantsV7*) {
  return Init(context, ranks, nodes, log);
}

Result GetCollInfo(void* context, Func coll, size_t bytes, int, float** cost_table, int num_algo,
                   int num_proto, int, int* channels) {
  auto* c = static_cast<Context*>(context);
  // NCCL passes its float[num_algo][num_proto] table as float**.
  float* table = reinterpret_cast<float*>(cost_table);
  const Decision d = Decide(c->fabric, coll, bytes, table, num_algo, num_proto);
  Apply(d, table, num_algo, num_proto, channels);
  if (d.change && c->log) {
    std::lock_guard<std::mutex> lock(c->mu);
    if (c->logged.insert({coll, Log2(bytes)}).second) {
      c->log(kLogInfo, kLogTuning, __FILE__, __LINE__,
             "%s tuner: %s %zu bytes -> Ring/%s, %d channels (%s fabric)", kName, FuncName(coll),
             bytes, ProtoName(d.proto), d.channels, FabricName(c->fabric));
    }
  }
  return kSuccess;
}

Result Finalize(void* context) {
  delete static_cast<Context*>(context);
  return kSuccess;
}

}  // namespace
}  // namespace spark::nccl_tuner

namespace tuner = spark::nccl_tuner;

#define SPARK_EXPORT extern "C" __attribute__((visibility("default")))

SPARK_EXPORT const tuner::TunerV7 ncclTunerPlugin_v7 = {
    "SparkRing", tuner::InitV7, tuner::GetCollInfo, tuner::Finalize, nullptr};
SPARK_EXPORT const tuner::TunerV6 ncclTunerPlugin_v6 = {
    "SparkRing", tuner::InitV5, tuner::GetCollInfo, tuner::Finalize, nullptr};
SPARK_EXPORT const tuner::TunerV5 ncclTunerPlugin_v5 = {
    "SparkRing", tuner::InitV5, tuner::GetCollInfo, tuner::Finalize};
