#!/usr/bin/env bash
# GPU time of every kernel of the engine's decode steps, measured one kernel at a time by Nsight
# Compute (ncu) inside the CUDA graphs of spark-decode-bench: where a step's time goes, per op.
# Each kernel runs alone under ncu (no overlap with its neighbours, caches kept warm), so the
# per-step sum exceeds the graph step's time; what it shows is each kernel's own cost.
# Usage: bench/engine/decode_kernel_profile.sh [BATCH] [OUT.csv]   (default 1, a temporary file)
# Env: SPARK_BUILD_DIR (default build), NCU (the ncu binary), DECODE_ARGS (extra
# spark-decode-bench flags, e.g. --weight-dtype fp8).
set -euo pipefail
cd "$(dirname "$0")/../.."
batch="${1:-1}"
bin="${SPARK_BUILD_DIR:-build}/bin/spark-decode-bench"
ncu="${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}"
[ -x "$bin" ] || { echo "decode_kernel_profile.sh: $bin not found; build with CUDA first (SPARK_CUDA=ON ./scripts/build.sh)" >&2; exit 2; }
[ -x "$ncu" ] || { echo "decode_kernel_profile.sh: Nsight Compute (ncu) not found; set NCU" >&2; exit 2; }
out="${2:-$(mktemp --suffix=.csv)}"
# Past the prompt, the eager step and the warm-up (about 20 steps of at most ~450 kernels), then
# about three graph steps.
"$ncu" --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
  --print-units base --launch-skip 9000 --launch-count 1200 \
  "$bin" --tp 1 --prefill 0 --batch "$batch" --steps 60 ${DECODE_ARGS:-} >"$out"
python3 bench/engine/decode_kernel_profile.py "$out"
