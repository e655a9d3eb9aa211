#!/usr/bin/env bash
# Runs our all-reduce (sparkctl bench allreduce -> spark-bench, one process per GPU) and
# nccl-tests' all_reduce_perf one after the other on the same machine, same sweep, and prints
# busbw and time side by side. Acceptance (issue 8): busbw within 10% for sizes >= 32 MB, time
# within 20% at 8 B.
#
# Usage: bench/collectives/compare_nccl_tests.sh [GPUS] [OUT_DIR]
#   BIN          folder holding sparkctl and spark-bench (default build/bin)
#   NCCL_TESTS   all_reduce_perf built from github.com/NVIDIA/nccl-tests (default
#                build-bench/nccl-tests/build/all_reduce_perf). Build it with:
#                  make MPI=0 NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
#                       CUDA_HOME=/usr/local/cuda NCCL_HOME=/usr/local/cuda
#   SWEEP        default "-b 8 -e 1G -f 2"
set -euo pipefail
gpus=${1:-2}
out=${2:-bench/results}
bin=${BIN:-build/bin}
nccl_tests=${NCCL_TESTS:-build-bench/nccl-tests/build/all_reduce_perf}
sweep=${SWEEP:--b 8 -e 1G -f 2}
mkdir -p "$out"
ours="$out/allreduce_ours_h200x${gpus}.txt"
theirs="$out/allreduce_nccl_tests_h200x${gpus}.txt"

if [ -x "$bin/sparkctl" ]; then
  # shellcheck disable=SC2086
  "$bin/sparkctl" bench allreduce $sweep -g "$gpus" --program "$bin/spark-bench" | tee "$ours"
else
  # No sparkctl here: start the ranks exactly as `sparkctl bench -g` does (rank r on GPU r).
  port=$((29600 + RANDOM % 1000))
  for r in $(seq 1 $((gpus - 1))); do
    # shellcheck disable=SC2086
    "$bin/spark-bench" allreduce $sweep --rank "$r" --world-size "$gpus" \
      --master "127.0.0.1:$port" --device "$r" >/dev/null &
  done
  # shellcheck disable=SC2086
  "$bin/spark-bench" allreduce $sweep --rank 0 --world-size "$gpus" --master "127.0.0.1:$port" \
    --device 0 | tee "$ours"
  wait
fi
# shellcheck disable=SC2086
"$nccl_tests" $sweep -g "$gpus" | tee "$theirs"

# size, out-of-place time and busbw from each; then the verdict per size.
python3 - "$ours" "$theirs" <<'PY'
import sys
def rows(path):
    out = {}
    for line in open(path):
        w = line.split()
        if not w or line.startswith('#') or not w[0].isdigit():
            continue
        out[int(w[0])] = (float(w[5]), float(w[7]), float(w[9]), float(w[11]))  # oop time, busbw; ip time, busbw
    return out
ours, theirs = rows(sys.argv[1]), rows(sys.argv[2])
print(f"{'size':>12} {'ours us':>9} {'nccl us':>9} {'ours bus':>9} {'nccl bus':>9}  verdict")
bad = 0
for size in sorted(set(ours) & set(theirs)):
    o, t = ours[size], theirs[size]
    verdict = ""
    if size >= 32 << 20:
        ratio = o[1] / t[1] if t[1] else 0
        ok = abs(ratio - 1) <= 0.10
        verdict = f"busbw {ratio:.3f}x {'ok' if ok else 'OUTSIDE 10%'}"
        bad += not ok
    if size == 8:
        ratio = o[0] / t[0] if t[0] else 0
        ok = abs(ratio - 1) <= 0.20
        verdict = f"time {ratio:.3f}x {'ok' if ok else 'OUTSIDE 20%'}"
        bad += not ok
    print(f"{size:>12} {o[0]:>9.2f} {t[0]:>9.2f} {o[1]:>9.2f} {t[1]:>9.2f}  {verdict}")
print("acceptance:", "met" if bad == 0 else f"{bad} size(s) outside the bounds")
PY
