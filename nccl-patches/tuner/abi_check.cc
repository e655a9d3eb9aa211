// Compile-time check that nccl_tuner_abi.h matches NCCL's own plugin headers (built only with
// -DSPARK_NCCL_PLUGIN_HEADERS=<nccl>/plugins/tuner/example/nccl and -DSPARK_NCCL_TUNER_MAX=<the
// newest tuner version they declare>: nothing of NCCL's is kept in this tree). Sizes, member offsets and enumerator values must agree, or this does not compile.
#include <cstddef>

#pragma GCC diagnostic ignored "-Wenum-compare"  // comparing their enums with ours is the point

#include "tuner.h"  // NCCL's

#include "nccl_tuner_abi.h"  // ours

namespace t = spark::nccl_tuner;

static_assert(sizeof(ncclResult_t) == sizeof(t::Result));
static_assert(ncclSuccess == t::kSuccess && ncclInvalidArgument == t::kInvalidArgument &&
              ncclInternalError == t::kInternalError);
static_assert(sizeof(ncclFunc_t) == sizeof(t::Func));
static_assert(ncclFuncBroadcast == t::kBroadcast && ncclFuncReduce == t::kReduce &&
              ncclFuncAllGather == t::kAllGather && ncclFuncReduceScatter == t::kReduceScatter &&
              ncclFuncAllReduce == t::kAllReduce);
static_assert(NCCL_ALGO_TREE == t::kAlgoTree && NCCL_ALGO_RING == t::kAlgoRing &&
              NCCL_ALGO_PAT == t::kAlgoPat && NCCL_NUM_ALGORITHMS == t::kNumAlgos);
static_assert(NCCL_PROTO_LL == t::kProtoLL && NCCL_PROTO_LL128 == t::kProtoLL128 &&
              NCCL_PROTO_SIMPLE == t::kProtoSimple && NCCL_NUM_PROTOCOLS == t::kNumProtos);
static_assert(NCCL_ALGO_PROTO_IGNORE == t::kIgnore);
static_assert(NCCL_LOG_WARN == t::kLogWarn && NCCL_LOG_INFO == t::kLogInfo);
static_assert(NCCL_INIT == t::kLogInit && NCCL_TUNING == t::kLogTuning && NCCL_ENV == t::kLogEnv);

static_assert(sizeof(ncclNvlDomainInfo_v5_t) == sizeof(t::NvlDomainInfo));
// The constants are passed by pointer and never read by our plugin; NCCL's example header and
// its internal one disagree on their layout (2.30: the example lacks perChMaxNVLSTreeBws).

#define SPARK_SAME_LAYOUT(theirs, ours)                                                  \
  static_assert(sizeof(theirs) == sizeof(ours));                                         \
  static_assert(offsetof(theirs, name) == offsetof(ours, name));                         \
  static_assert(offsetof(theirs, init) == offsetof(ours, init));                         \
  static_assert(offsetof(theirs, getCollInfo) == offsetof(ours, get_coll_info));         \
  static_assert(offsetof(theirs, finalize) == offsetof(ours, finalize))

// The newest tuner version the given headers declare (2.28: 5, 2.30: 6, later: 7).
#ifndef SPARK_NCCL_TUNER_MAX
#define SPARK_NCCL_TUNER_MAX 5
#endif
SPARK_SAME_LAYOUT(ncclTuner_v5_t, t::TunerV5);
#if SPARK_NCCL_TUNER_MAX >= 6
SPARK_SAME_LAYOUT(ncclTuner_v6_t, t::TunerV6);
static_assert(offsetof(ncclTuner_v6_t, getChunkSize) == offsetof(t::TunerV6, get_chunk_size));
#endif
#if SPARK_NCCL_TUNER_MAX >= 7
SPARK_SAME_LAYOUT(ncclTuner_v7_t, t::TunerV7);
static_assert(offsetof(ncclTuner_v7_t, getChunkSize) == offsetof(t::TunerV7, get_chunk_size));
#endif
