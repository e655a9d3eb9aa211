#!/usr/bin/env bash
# The serving figures of docs/bench.md on one GPU machine, in one command:
#   1. makes the Qwen3-8B-shaped bf16 checkpoint (random weights, the real Qwen3 tokenizer,
#      40,960 positions as Qwen3-8B) unless MODEL_DIR holds one;
#   2. starts `spark-engine serve --backend cuda` on it (--max-model-len 40960, a KV cache for 8
#      streams of 33k tokens);
#   3. `sparkctl check --random-weights` (protocol checks judged, content checks not);
#   4. `sparkctl bench serve` over --concurrency 1,2,4,8 x --context 1k,32k (128k exceeds this
#      model's positions: the run shows the cell skipped), 128 output tokens, 3 rounds; table,
#      JSON and SVG plot;
#   5. the structured-output benchmarks: grammar_mask_bench (mask time per token, 151,936 and
#      129,280 vocabularies) and decode_bench.py on this checkpoint with and without a schema.
# Results go to bench/results/ (serve_h200.json, serve_h200.svg, check_h200.json,
# grammar_mask_h200.json, grammar_decode_h200.json) and the tables to stdout.
# Usage: bench/serve/run_h200.sh      Env: SPARK_BUILD_DIR (default build), MODEL_DIR (default
# /tmp/spark-qwen3-8b), PORT (default 18432), CONCURRENCY, CONTEXT, REPEATS, SERVE_ARGS.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${SPARK_BUILD_DIR:-build}/bin"
model="${MODEL_DIR:-/tmp/spark-qwen3-8b}"
port="${PORT:-18432}"
out=bench/results
for b in spark-engine sparkctl grammar_mask_bench; do
  [ -x "$bin/$b" ] || { echo "run_h200.sh: $bin/$b not found; build with CUDA first (SPARK_CUDA=ON ./scripts/build.sh)" >&2; exit 2; }
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader >&2 || true
if [ ! -f "$model/config.json" ]; then
  echo "== making the Qwen3-8B-shaped checkpoint in $model" >&2
  python3 scripts/make_demo_model.py "$model" --shape qwen3-8b >/dev/null
fi
server_pid=""
cleanup() { [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true; }
trap cleanup EXIT
log="$(mktemp)"
"$bin/spark-engine" serve --model "$model" --backend cuda --port "$port" --served-model-name qwen3-8b \
  --max-model-len 40960 --num-kv-blocks 20000 --max-num-seqs 32 ${SERVE_ARGS:-} > "$log" 2>&1 &
server_pid=$!
for _ in $(seq 900); do
  python3 -c 'import sys,urllib.request;urllib.request.urlopen(sys.argv[1],timeout=5)' \
    "http://127.0.0.1:$port/ready" 2>/dev/null && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; echo "run_h200.sh: serve exited" >&2; exit 1; }
  sleep 1
done
url="http://127.0.0.1:$port"
echo "== sparkctl check" >&2
"$bin/sparkctl" check --url "$url" --random-weights --json > "$out/check_h200.json" || true
"$bin/sparkctl" check --url "$url" --random-weights || true
echo "== sparkctl bench serve" >&2
"$bin/sparkctl" bench serve --url "$url" --concurrency "${CONCURRENCY:-1,2,4,8}" \
  --context "${CONTEXT:-1k,32k,128k}" --output-tokens 128 --repeats "${REPEATS:-3}" \
  --out "$out/serve_h200.json" --plot "$out/serve_h200.svg"
echo "== structured output: decode with and without a schema" >&2
kill "$server_pid"; wait "$server_pid" || true; server_pid=""
python3 bench/grammar/decode_bench.py --engine "$bin/spark-engine" --model "$model" --backend cuda \
  --concurrency 1,8,32 --tokens 256 --rounds 3 --json "$out/grammar_decode_h200.json"
echo "== structured output: mask time per token" >&2
"$bin/grammar_mask_bench" --threads 4 --batch 1 8 32 --json "$out/grammar_mask_h200.json"
