#!/usr/bin/env bash
# The CUDA backend benchmark in one command, on this machine's GPUs (two for the TP=2 figure):
#   1. spark-decode-bench: our engine end to end on a Qwen3-8B-shaped bf16 model (decode b1/b32
#      in CUDA graphs, TP=2, 8K prefill; bf16 KV cache as the engine picks for bf16 weights, and
#      again with an fp32 one, and once more with fp8 weights) with copy bandwidth and bf16
#      GEMM peak of the same GPU;
#   2. spark-kernel-bench + PyTorch SDPA: paged decode attention bandwidth and prefill attention;
#   3. the peer, ../shared/bench/peer_torch_decode.py (torch.compile, CUDA graphs), same job;
# then writes bench/results/cuda_backend.json (or the path given) with the ratios and the raw
# figures behind them. Usage: bench/engine/cuda_backend.sh [OUT.json]
# Our bf16 decode and the peer run REPEATS times each, alternating (the first round of ours with
# the prefill, the others decode only); the ratios to the peer are of the medians, as a single
# run of either moves by a few percent between jobs.
# Env: SPARK_BUILD_DIR (default build), PEER (the peer script's path), DECODE_ARGS (extra
# spark-decode-bench flags, e.g. --profile), TP_ARGS (flags of the TP=2 runs),
# TP_TIMEOUT (seconds, default 300), REPEATS (rounds of ours and the peer, default 5).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${SPARK_BUILD_DIR:-build}/bin"
peer="${PEER:-../shared/bench/peer_torch_decode.py}"
out="${1:-bench/results/cuda_backend.json}"
for b in spark-decode-bench spark-kernel-bench; do
  [ -x "$bin/$b" ] || { echo "cuda_backend.sh: $bin/$b not found; build with CUDA first (SPARK_CUDA=ON ./scripts/build.sh)" >&2; exit 2; }
done
[ -f "$peer" ] || { echo "cuda_backend.sh: peer script $peer not found (set PEER)" >&2; exit 2; }
repeats="${REPEATS:-5}"
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "cuda_backend.sh: REPEATS must be a whole number >= 1 (got '$repeats')" >&2; exit 2; }
# PARTS keeps the pieces (default: a temporary folder), so a failed step leaves the others.
tmp="${PARTS:-$(mktemp -d)}"
mkdir -p "$tmp"
[ -n "${PARTS:-}" ] || trap 'rm -rf "$tmp"' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader >&2 || true
echo "== engine on one GPU (spark-decode-bench)" >&2
"$bin/spark-decode-bench" --tp 1 --json "$tmp/decode.json" ${DECODE_ARGS:-}
echo "== engine on one GPU with an fp32 KV cache (for comparison)" >&2
"$bin/spark-decode-bench" --tp 1 --kv-dtype fp32 --json "$tmp/decode_fp32_kv.json"
echo "== engine on one GPU with fp8 weights (E4M3, 128 x 128 block scales; for comparison)" >&2
"$bin/spark-decode-bench" --tp 1 --weight-dtype fp8 --json "$tmp/decode_fp8.json"
echo "== kernels (spark-kernel-bench, PyTorch SDPA)" >&2
"$bin/spark-kernel-bench" --json "$tmp/kernels.json" > "$tmp/kernels.txt"
python3 bench/kernels/sdpa_peer.py "$tmp/kernels.json"
echo "== peer ($peer), round 1 of $repeats" >&2
python3 "$peer" "$tmp/peer.json"
for i in $(seq 2 "$repeats"); do
  echo "== engine on one GPU, decode only, round $i of $repeats" >&2
  "$bin/spark-decode-bench" --tp 1 --prefill 0 --json "$tmp/decode_$i.json" ${DECODE_ARGS:-}
  echo "== peer, round $i of $repeats" >&2
  python3 "$peer" "$tmp/peer_$i.json"
done
gpus=$(nvidia-smi -L 2>/dev/null | wc -l || true)
if [ "$gpus" -ge 2 ]; then
  echo "== engine at TP=2 (spark-decode-bench)" >&2
  timeout "${TP_TIMEOUT:-300}" "$bin/spark-decode-bench" --tp 2 --tp-only --prefill 0 ${TP_ARGS:-} \
    --json "$tmp/decode_tp2.json" || echo "cuda_backend.sh: the TP=2 run failed (rc $?)" >&2
  echo "== engine at TP=2, the one-way peer protocol (for comparison)" >&2
  timeout "${TP_TIMEOUT:-300}" "$bin/spark-decode-bench" --tp 2 --tp-only --prefill 0 --peer-one-way \
    ${TP_ARGS:-} --json "$tmp/decode_tp2_one_way.json" ||
    echo "cuda_backend.sh: the TP=2 one-way run failed (rc $?)" >&2
  echo "== engine at TP=2, collectives through NCCL (for comparison)" >&2
  timeout "${TP_TIMEOUT:-300}" "$bin/spark-decode-bench" --tp 2 --tp-only --prefill 0 --tp-nccl \
    ${TP_ARGS:-} --json "$tmp/decode_tp2_nccl.json" ||
    echo "cuda_backend.sh: the TP=2 NCCL run failed (rc $?)" >&2
fi
mkdir -p "$(dirname "$out")"
python3 bench/engine/cuda_backend_merge.py "$tmp" "$out"
