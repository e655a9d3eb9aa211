#!/usr/bin/env bash
# What a user gets from `spark-engine serve --backend cuda` against the engine's own speed, in one
# command on a GPU machine:
#   1. makes a Qwen3-8B-shaped bf16 checkpoint (random weights, the real Qwen3 tokenizer) unless
#      MODEL_DIR holds one already;
#   2. times a sequential read of its files (seq_read.py, as dd does it), from cold cache (pages
#      dropped with POSIX_FADV_DONTNEED) and from the page cache;
#   3. spark-decode-bench b1 / b32 (the engine alone, CUDA graphs, launched ahead);
#   4. serve with default flags (only --backend cuda): started once from cold cache and once from
#      the page cache (the load time from its log), then streamed /v1/completions load at
#      c1, c8, c32 (~100-token prompts, 256 tokens, ignore_eos; serve_load.py);
# and writes bench/results/serve_cuda.json (or the path given) with the ratios and raw figures.
# Usage: bench/engine/serve_cuda.sh [OUT.json]
# Env: SPARK_BUILD_DIR (default build), MODEL_DIR (default /tmp/spark-qwen3-8b), TOKENIZER
# (default ../shared/data/tokenizers/qwen3), PORT (default 18431), SERVE_ARGS (extra serve flags).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${SPARK_BUILD_DIR:-build}/bin"
out="${1:-bench/results/serve_cuda.json}"
model="${MODEL_DIR:-/tmp/spark-qwen3-8b}"
tokenizer="${TOKENIZER:-../shared/data/tokenizers/qwen3}"
port="${PORT:-18431}"
for b in spark-decode-bench spark-engine; do
  [ -x "$bin/$b" ] || { echo "serve_cuda.sh: $bin/$b not found; build with CUDA first (SPARK_CUDA=ON ./scripts/build.sh)" >&2; exit 2; }
done
tmp="${PARTS:-$(mktemp -d)}"
mkdir -p "$tmp"
server_pid=""
cleanup() { [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true; [ -n "${PARTS:-}" ] || rm -rf "$tmp"; }
trap cleanup EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >&2 || true
if [ ! -f "$model/config.json" ]; then
  echo "== making the Qwen3-8B-shaped checkpoint in $model" >&2
  python3 scripts/make_demo_model.py "$model" --shape qwen3-8b --tokenizer "$tokenizer" >/dev/null
fi
files=("$model"/*.safetensors)
echo "== sequential read of ${#files[@]} files, cold then page cache" >&2
python3 bench/engine/seq_read.py drop "${files[@]}"
python3 bench/engine/seq_read.py read "${files[@]}" > "$tmp/read_cold.json"
python3 bench/engine/seq_read.py read "${files[@]}" > "$tmp/read_warm.json"
cat "$tmp/read_cold.json" "$tmp/read_warm.json" >&2
echo "== engine (spark-decode-bench)" >&2
"$bin/spark-decode-bench" --tp 1 --prefill 0 --json "$tmp/decode.json"

# GET a URL to stdout (no curl needed); fails on a non-2xx answer.
http_get() { python3 -c 'import sys,urllib.request;sys.stdout.write(urllib.request.urlopen(sys.argv[1],timeout=10).read().decode())' "$1"; }

# Starts serve, waits for /ready, and leaves its pid in server_pid; log in $1.
start_server() {
  "$bin/spark-engine" serve --model "$model" --backend cuda --port "$port" ${SERVE_ARGS:-} > "$1" 2>&1 &
  server_pid=$!
  for _ in $(seq 600); do
    http_get "http://127.0.0.1:$port/ready" >/dev/null 2>&1 && return 0
    kill -0 "$server_pid" 2>/dev/null || { cat "$1" >&2; echo "serve_cuda.sh: serve exited" >&2; exit 1; }
    sleep 0.5
  done
  echo "serve_cuda.sh: serve not ready after 300 s" >&2; exit 1
}
stop_server() { kill "$server_pid"; wait "$server_pid" || true; server_pid=""; }

echo "== serve from cold cache" >&2
python3 bench/engine/seq_read.py drop "${files[@]}"
start_server "$tmp/serve_cold.log"
stop_server
echo "== serve from the page cache, then the load" >&2
start_server "$tmp/serve.log"
name=$(basename "$model")
for c in 1 8 32; do
  python3 bench/engine/serve_load.py --url "http://127.0.0.1:$port" --model "$name" \
    --concurrency "$c" --max-tokens 256 > "$tmp/load_c$c.json"
  cat "$tmp/load_c$c.json" >&2
done
http_get "http://127.0.0.1:$port/metrics" > "$tmp/metrics.txt" || true
stop_server
mkdir -p "$(dirname "$out")"
python3 bench/engine/serve_cuda_merge.py "$tmp" "$model" "$out"
