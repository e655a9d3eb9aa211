#!/usr/bin/env bash
# DeepSeek-V4.1-Flash on the CUDA backend in one command on a GPU machine: spark-deepseek-bench
# (V4.1-Flash-shaped layers, weights in the released types, TP=1) at batch 1, 8, 32 and contexts
# 4K and 64K, prefill at 8K and 64K, then the projection to DGX Sparks
# (deepseek_v41_projection.py). Writes bench/results/deepseek_v41_cuda.json (or the path given).
# Usage: bench/engine/deepseek_v41_cuda.sh [OUT.json]
# Env: SPARK_BUILD_DIR (default build; or BIN, the folder holding spark-deepseek-bench),
# BENCH_ARGS (extra flags, e.g. --precise).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${BIN:-${SPARK_BUILD_DIR:-build}/bin}"
out="${1:-bench/results/deepseek_v41_cuda.json}"
[ -x "$bin/spark-deepseek-bench" ] || {
  echo "deepseek_v41_cuda.sh: $bin/spark-deepseek-bench not found; build with CUDA first" >&2
  exit 2
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader >&2 || true
"$bin/spark-deepseek-bench" --batch 1,8,32 --context 4096,65536 --prefill 8192,65536 \
  --json "$out" ${BENCH_ARGS:-}
python3 bench/engine/deepseek_v41_projection.py "$out" --write \
  --verify-cost bench/results/speculative_h200/spec_b1.json
