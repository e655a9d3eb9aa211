#!/usr/bin/env bash
# The memory plan against the engine on a GPU machine (the H200 row of issue "memory that never
# wedges a Spark"): a Qwen3-8B-shaped bf16 checkpoint served with `spark-engine serve --backend
# cuda`, its device memory (nvidia-smi, this process) and resident host memory (status file)
#   1. after start-up (weights, KV cache, CUDA graphs captured by the warm-up), and
#   2. at its peak while requests fill the whole KV cache (polled every 0.2 s),
# each next to `spark-engine plan --json` for the same flags. Prints a table, writes JSON.
# Usage: bench/memory/plan_vs_engine.sh [OUT.json]
# Env: SPARK_BUILD_DIR (default build), MODEL_DIR (default /tmp/spark-qwen3-8b), TOKENIZER
# (default ../shared/data/tokenizers/qwen3), PORT (default 18441), SEQS (running requests,
# default 32), LEN (max model length, default 4096), CHUNK (tokens per step, default 2048).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${SPARK_BUILD_DIR:-build}/bin"
out="${1:-bench/results/memory_plan_h200.json}"
model="${MODEL_DIR:-/tmp/spark-qwen3-8b}"
tokenizer="${TOKENIZER:-../shared/data/tokenizers/qwen3}"
port="${PORT:-18441}"
seqs="${SEQS:-32}"
len="${LEN:-4096}"
chunk="${CHUNK:-2048}"
blocks=$(( seqs * ((len + 15) / 16) ))
[ -x "$bin/spark-engine" ] || { echo "plan_vs_engine.sh: $bin/spark-engine not found; build with CUDA (SPARK_CUDA=ON ./scripts/build.sh)" >&2; exit 2; }
command -v nvidia-smi >/dev/null || { echo "plan_vs_engine.sh: nvidia-smi not found: this needs a GPU machine" >&2; exit 2; }
tmp=$(mktemp -d)
server_pid=""
cleanup() { [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >&2
if [ ! -f "$model/config.json" ]; then
  echo "== making the Qwen3-8B-shaped checkpoint in $model" >&2
  python3 scripts/make_demo_model.py "$model" --shape qwen3-8b --tokenizer "$tokenizer" >/dev/null
fi
flags=(--model "$model" --backend cuda --max-model-len "$len" --max-num-seqs "$seqs"
       --max-batched-tokens "$chunk" --num-kv-blocks "$blocks")
echo "== plan" >&2
"$bin/spark-engine" plan --json --no-tp-sweep "${flags[@]}" --node here=local > "$tmp/plan.json" || true

# The device memory this process holds (MiB), as nvidia-smi lists it.
gpu_mib() {
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits |
    awk -F', ' -v p="$1" '$1 == p { print $2 }'
}

echo "== serve" >&2
"$bin/spark-engine" serve "${flags[@]}" --tokenizer "$tokenizer" --port "$port" \
  --served-model-name bench --status-file "$tmp/status.json" > "$tmp/serve.log" 2>&1 &
server_pid=$!
for _ in $(seq 1200); do
  python3 -c 'import sys,urllib.request;urllib.request.urlopen(sys.argv[1],timeout=5)' \
    "http://127.0.0.1:$port/ready" 2>/dev/null && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$tmp/serve.log" >&2; exit 1; }
  sleep 0.5
done
sleep 1.5  # the status file's ticker
gpu_mib "$server_pid" > "$tmp/gpu_start.txt"
cp "$tmp/status.json" "$tmp/status_start.json"

echo "== load: $seqs streams at a time until the KV cache ($((blocks * 16)) tokens) has cycled" >&2
( peak=0; while kill -0 "$server_pid" 2>/dev/null; do
    m=$(gpu_mib "$server_pid"); [ -n "$m" ] && [ "$m" -gt "$peak" ] && peak=$m && echo "$peak" > "$tmp/gpu_peak.txt"
    sleep 0.2; done ) &
poller=$!
python3 bench/memory/fill_kv.py --url "http://127.0.0.1:$port" --model bench --streams "$seqs" \
  --tokens $((blocks * 16 * 2)) --len "$len" > "$tmp/load.json"
sleep 1.5
cp "$tmp/status.json" "$tmp/status_peak.json"
kill "$poller" 2>/dev/null || true
kill "$server_pid"; wait "$server_pid" || true; server_pid=""
mkdir -p "$(dirname "$out")"
python3 bench/memory/plan_vs_engine.py "$tmp" "$out"
