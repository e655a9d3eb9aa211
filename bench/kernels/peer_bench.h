// The tensor-parallel all-reduce of a decode layer's output, timed in CUDA graphs between two
// ranks: the peer sum followed by the AddRmsNorm kernel (two kernels), against the sum fused
// with the add and the norm (kernels::PeerAllReduceAddRmsNorm, one kernel). One GPU a rank where
// two are visible (their link's latency is in the figure); otherwise both ranks on device 0,
// where the figure holds the launches and passes the fusion saves, not a link's latency, and
// which needs SPARK_PDL=0 (it refuses otherwise: with dependent launch the two ranks' graphs
// stalled each other).
#pragma once

#include "kernels/peer_all_reduce.h"

namespace spark::kernels {

struct PeerTimes {
  bool one_device = false;                  // both ranks on device 0
  double two_kernels_us = 0, fused_us = 0;  // per call (the median of 20 graph launches)
};

// `calls` calls of [rows, dim] per graph; exits with a message on a CUDA error or a refusal.
PeerTimes TimePeerAllReduceNorm(int rows, int dim, int calls, PeerProtocol protocol);

}  // namespace spark::kernels
