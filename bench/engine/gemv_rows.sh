#!/usr/bin/env bash
# Decode at batch 1-4 and 8 on the Qwen3-8B shape with bf16 Linear layers as a GEMV up to 1, 2
# and 4 rows (SPARK_GEMV_MAX_ROWS; more rows take the GEMM path): which small batches the GEMV
# should keep. Writes bench/results/gemv_rows/decode_gemv{1,2,4}.json (or under the folder
# given). Usage: bench/engine/gemv_rows.sh [OUT_DIR]; SPARK_BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${SPARK_BUILD_DIR:-build}/bin/spark-decode-bench"
[ -x "$bin" ] || { echo "gemv_rows.sh: $bin not found; build with CUDA first" >&2; exit 2; }
out="${1:-bench/results/gemv_rows}"
mkdir -p "$out"
for rows in 4 1 2; do
  echo "== bf16 GEMV up to $rows rows" >&2
  SPARK_GEMV_MAX_ROWS=$rows "$bin" --tp 1 --prefill 0 --steps 100 --batch 1,2,3,4,8 \
    --json "$out/decode_gemv$rows.json"
done
