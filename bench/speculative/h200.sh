#!/usr/bin/env bash
# The speculative step on one GPU (spark-decode-bench --speculative): the Qwen3-8B shape with
# random weights, greedy, k = 1..7 with an always-wrong and an oracle drafter against plain
# decode, batch 1 and 8, one process per batch. Writes bench/results/speculative_h200/spec_b{1,8}.json
# (or under the folder given). Usage: bench/speculative/h200.sh [OUT_DIR]; SPARK_BUILD_DIR
# (default build).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${SPARK_BUILD_DIR:-build}/bin/spark-decode-bench"
[ -x "$bin" ] || { echo "h200.sh: $bin not found; build with CUDA first" >&2; exit 2; }
out="${1:-bench/results/speculative_h200}"
mkdir -p "$out"
for b in 1 8; do
  "$bin" --speculative 1,2,3,4,5,6,7 --speculative-only --batch "$b" --speculative-tokens 128 \
    --json "$out/spec_b$b.json"
done
