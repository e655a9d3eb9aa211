#!/usr/bin/env bash
# DSpark on the V4.1-Flash-shaped bench model in one command on a GPU machine: spark-deepseek-bench
# --dspark (a random 3-stage stack in the released types beside the bench layers) times decode
# steps with the draft's context keys at batch 1 and 8 and one draft of 1 and 8 blocks against
# the bytes it reads; then the plain bench at the same points for the steps without DSpark.
# Writes bench/results/deepseek_v41_dspark.json and deepseek_v41_dspark_plain.json (or the
# prefix given). Usage: bench/engine/deepseek_v41_dspark.sh [OUT_PREFIX]
# Env: BIN or SPARK_BUILD_DIR as deepseek_v41_cuda.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${BIN:-${SPARK_BUILD_DIR:-build}/bin}"
out="${1:-bench/results/deepseek_v41_dspark}"
[ -x "$bin/spark-deepseek-bench" ] || {
  echo "deepseek_v41_dspark.sh: $bin/spark-deepseek-bench not found; build with CUDA first" >&2
  exit 2
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >&2 || true
"$bin/spark-deepseek-bench" --dspark --batch 1,8 --context 4096 --steps 16 --json "$out.json"
"$bin/spark-deepseek-bench" --batch 1,8 --context 4096 --prefill 0 --steps 16 \
  --json "${out}_plain.json"
