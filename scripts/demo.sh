#!/usr/bin/env bash
# Sets everything up and runs the main job on the embedded default: a simulated four-node DGX
# Spark ring (network namespaces, real sshd, veth "DAC cables"), discovery, then `sparkctl up`
# with the tiny demo model on the CPU engine (preflight, fabric, weights, engine binary, one
# spark-engine per node at TP=4, wait until ready), one chat request through the endpoint and
# `sparkctl status`. Needs root (network namespaces). Idempotent: a second run reuses the
# simulated cluster and finds the model already up. Clean up with:
#   ./build/bin/sparkctl down -c /run/sparkctl-sim/demo/cluster.yaml
#   ./build/bin/sparkctl sim destroy --name demo
set -euo pipefail
cd "$(dirname "$0")/.."
# The demo runs on this machine only: no aarch64 cross toolchain needed.
SPARK_CROSS="${SPARK_CROSS:-off}" ./scripts/install-deps.sh
./scripts/build.sh
bin=./${SPARK_BUILD_DIR:-build}/bin
name=demo
seed=/run/sparkctl-sim/$name/cluster.yaml
profile=profiles/qwen3-tiny-demo.yaml

step() { printf '\n== %s\n' "$*"; }

# Only the demo's: the DeepSeek profiles need a CUDA build and the manifest of your checkpoint.
step "1/6 Validating the profile (sparkctl profile check)"
$bin/sparkctl profile check "$profile"

step "2/6 A simulated four-node ring (sparkctl sim create)"
if [ -f "$seed" ] && $bin/sparkctl sim status --json | grep -q "\"inventory\": \"$seed\""; then
  echo "cluster '$name' already exists: $seed"
else
  $bin/sparkctl sim create --name "$name" --nodes 4 --topology ring
fi

step "3/6 Discovery: identities, cabling, ring order (sparkctl discover)"
$bin/sparkctl discover -c "$seed"

step "4/6 The tiny demo model (random weights: expect gibberish) where the profile keeps it"
# The simulated nodes share the host's /var/lib, so one copy serves every node.
model=$($bin/sparkctl profile show "$profile" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["model"]["path"])')
if [ ! -f "$model/config.json" ]; then
  python3 scripts/make_demo_model.py "$model"
fi
echo "$model"

step "5/6 sparkctl up: preflight, fabric, weights, engine, 4 ranks, wait for ready"
$bin/sparkctl up -c "$seed" -p "$profile" --yes

step "6/6 One chat request through the endpoint (it listens on 127.0.0.1 of rank 0's node)"
$bin/sparkctl sim exec --name "$name" spark-0 -- curl -sS --max-time 60 \
  http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' \
  -d '{"model":"qwen3-tiny-demo","messages":[{"role":"user","content":"Hello from a simulated Spark ring"}],"max_tokens":16,"temperature":0.8,"seed":1}'
echo
$bin/sparkctl status -c "$seed"

printf '\nDone. Stop the model: %s/sparkctl down -c %s; remove the cluster: %s/sparkctl sim destroy --name %s\n' \
  "$bin" "$seed" "$bin" "$name"
