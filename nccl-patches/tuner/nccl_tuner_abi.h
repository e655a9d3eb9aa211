// The NCCL tuner plugin interface as NCCL calls it (versions 5, 6 and 7), declared here from
// NCCL's documented ABI: NCCL dlopen()s the library named by NCCL_TUNER_PLUGIN, looks up the
// data symbol ncclTunerPlugin_v<N> (newest it knows first: 2.28 knows v5, 2.30 v6, later
// releases v7) and calls its init / getCollInfo / finalize (and getChunkSize from v6).
// Names are ours; layouts, values and calling conventions are NCCL's, and abi_check.cc
// compares them with NCCL's own plugin headers (nccl-patches/README.md, "ABI check").
#pragma once

#include <cstddef>
#include <cstdint>

namespace spark::nccl_tuner {

// ncclResult_t (a C enum).
enum Result : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
};

// ncclFunc_t: the collective a call is about.
enum Func : int {
  kBroadcast = 0,
  kReduce = 1,
  kAllGather = 2,
  kReduceScatter = 3,
  kAllReduce = 4,
};

// Rows and columns of the cost table: float[num_algo][num_proto], in microseconds; entries NCCL
// cannot use hold -1 (kIgnore). The lowest non-negative entry wins.
inline constexpr int kAlgoTree = 0, kAlgoRing = 1, kAlgoCollNetDirect = 2, kAlgoCollNetChain = 3,
                     kAlgoNvls = 4, kAlgoNvlsTree = 5, kAlgoPat = 6, kNumAlgos = 7;
inline constexpr int kProtoLL = 0, kProtoLL128 = 1, kProtoSimple = 2, kNumProtos = 3;
inline constexpr float kIgnore = -1.0f;

// ncclDebugLogLevel and the ncclDebugLogSubSys bits the plugin logs under.
enum LogLevel : int { kLogNone = 0, kLogVersion = 1, kLogWarn = 2, kLogInfo = 3 };
inline constexpr unsigned long kLogInit = 1, kLogTuning = 64, kLogEnv = 128;
using Logger = void (*)(LogLevel level, unsigned long flags, const char* file, int line,
                        const char* fmt, ...);

struct NvlDomainInfo {  // ncclNvlDomainInfo_v5_t (same in v6 and v7)
  int nvl_domains;
  int min_ranks_per_domain;
  int max_ranks_per_domain;
};

// ncclTunerConstants_v5_t as NCCL's src/include/plugin/tuner declares it (v6 the same; v7 has
// five compute-capability rows). The plugin receives a pointer and never reads or writes it.
template <int kCompCaps>
struct Constants {
  double base_latencies[kNumAlgos][kNumProtos];
  double hw_latencies[3][kNumAlgos][kNumProtos];
  double ll_max_bws[kCompCaps][3];
  double per_ch_max_ring_ll128_bws[kCompCaps][3];
  double per_ch_max_tree_ll128_bws[kCompCaps][3];
  double per_ch_max_tree_bws[kCompCaps][3];
  double per_ch_max_nvls_tree_bws[kCompCaps][3];
};
using ConstantsV5 = Constants<4>;
using ConstantsV7 = Constants<5>;

using GetCollInfoFn = Result (*)(void* context, Func coll, size_t bytes, int num_pipe_ops,
                                 float** cost_table, int num_algo, int num_proto, int reg_buff,
                                 int* channels);
using FinalizeFn = Result (*)(void* context);
using GetChunkSizeFn = Result (*)(void* context, Func coll, size_t bytes, int algo, int proto,
                                  int channels, size_t* chunk_size);

// ncclTuner_v5_t
struct TunerV5 {
  const char* name;
  Result (*init)(void** context, uint64_t comm_id, size_t ranks, size_t nodes, Logger log,
                 NvlDomainInfo* nvl, ConstantsV5* constants);
  GetCollInfoFn get_coll_info;
  FinalizeFn finalize;
};

// ncclTuner_v6_t
struct TunerV6 {
  const char* name;
  Result (*init)(void** context, uint64_t comm_id, size_t ranks, size_t nodes, Logger log,
                 NvlDomainInfo* nvl, ConstantsV5* constants);
  GetCollInfoFn get_coll_info;
  FinalizeFn finalize;
  GetChunkSizeFn get_chunk_size;  // may be null: NCCL keeps its chunk size
};

// ncclTuner_v7_t
struct TunerV7 {
  const char* name;
  Result (*init)(void** context, uint64_t comm_id, size_t ranks, size_t nodes, Logger log,
                 NvlDomainInfo* nvl, ConstantsV7* constants);
  GetCollInfoFn get_coll_info;
  FinalizeFn finalize;
  GetChunkSizeFn get_chunk_size;
};

}  // namespace spark::nccl_tuner
