#!/usr/bin/env bash
# For a machine with NVIDIA GPUs (the H200 test machines): builds the CUDA tree, then
#   1. the one-shot transport's GPU tests (label gpu: ranks sharing GPU 0, staged through pinned
#      host memory, eager and captured in a CUDA graph, and a stalled rank);
#   2. NCCL with the Spark tuner plugin loaded (NCCL_TUNER_PLUGIN) on every visible GPU, ring
#      policy forced (SPARK_NCCL_TOPOLOGY=ring), NCCL_DEBUG=INFO for INIT and TUNING: NCCL's log
#      must show the plugin loaded and its Ring/LL|Simple choices (two GPUs or more for choices
#      that mean anything; one GPU still shows the plugin loading);
#   3. `sparkctl bench allreduce --transport oneshot` on device memory (two ranks, sharing GPU 0
#      when there is one) and, with two GPUs or more, `--transport nccl` for comparison.
# Everything lands in OUT (default ./h200-oneshot-<date>); the summary says what passed.
# Usage, from the repository root:  nccl-patches/run_h200.sh [OUT]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-h200-oneshot-$(date +%Y%m%d-%H%M%S)}
build=${SPARK_BUILD_DIR:-build-h200}
mkdir -p "$out"
summary=()
note() { summary+=("$1"); echo "== $1"; }

gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$gpus" -ge 1 ] || { echo "run_h200: no GPU (nvidia-smi -L lists none)" >&2; exit 2; }
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1; } \
  > "$out/machine.txt"

SPARK_BUILD_DIR=$build SPARK_CUDA=ON SPARK_JOBS=${SPARK_JOBS:-16} ./scripts/build.sh \
  > "$out/build.log" 2>&1 || { echo "run_h200: build failed, see $out/build.log" >&2; exit 2; }

# 1. GPU tests of the staged one-shot path (one process per case: the stalled case traps).
(cd "$build" && ctest -R 'comm_oneshot_gpu_test' --output-on-failure) > "$out/gpu_tests.log" 2>&1
rc=$?
note "GPU tests (comm_oneshot_gpu_test): $([ $rc -eq 0 ] && echo passed || echo FAILED, see gpu_tests.log)"
(cd "$build" && ctest -R 'nccl_tuner_plugin_test' --output-on-failure) > "$out/tuner_unit.log" 2>&1
note "tuner unit tests: $([ $? -eq 0 ] && echo passed || echo FAILED)"

# 2. NCCL with the plugin.
plugin="$PWD/$build/lib/libnccl-tuner-spark.so"
ranks=$(( gpus >= 2 ? gpus : 1 ))
SPARK_NCCL_TOPOLOGY=ring NCCL_TUNER_PLUGIN="$plugin" NCCL_DEBUG=INFO \
  NCCL_DEBUG_SUBSYS=INIT,TUNING NCCL_NVLS_ENABLE=0 \
  "$build/bin/sparkctl" bench allreduce -g "$ranks" --transport nccl -b 4K -e 4M -f 4 -n 20 \
  > "$out/nccl_plugin.txt" 2> "$out/nccl_plugin.log"
rc=$?
loaded=$(grep -c "SparkRing tuner: ring fabric" "$out/nccl_plugin.log")
choices=$(grep -c "SparkRing tuner: AllReduce" "$out/nccl_plugin.log")
note "NCCL + plugin on $ranks GPU(s): exit $rc, plugin init lines $loaded, choice lines $choices \
(nccl_plugin.log; NCCL's own lines: grep -i 'algo\|tuner' there)"
[ "$gpus" -ge 2 ] || note "one GPU: NCCL ran one rank, whose collectives need no algorithm"

# 3. One-shot on device memory, and NCCL for comparison.
"$build/bin/sparkctl" bench allreduce -g 2 --transport oneshot -b 4K -e 64K -f 2 -n 200 -w 20 \
  > "$out/oneshot_gpu.txt" 2>&1
note "oneshot bench on GPU memory, 2 ranks: exit $? (oneshot_gpu.txt)"
if [ "$gpus" -ge 2 ]; then
  NCCL_NVLS_ENABLE=0 "$build/bin/sparkctl" bench allreduce -g 2 --transport nccl -b 4K -e 64K \
    -f 2 -n 200 -w 20 > "$out/nccl_gpu.txt" 2>&1
  note "nccl bench, 2 GPUs: exit $? (nccl_gpu.txt)"
fi
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
