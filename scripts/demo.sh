#!/usr/bin/env bash
# Sets everything up and runs the main job on the embedded default: a simulated four-node DGX
# Spark ring (network namespaces, real sshd, veth "DAC cables"), discovery, preflight, the fabric,
# and the tiny demo model on the CPU engine. Needs root (network namespaces). Idempotent: a second
# run reuses the simulated cluster. Clean up with: ./build/bin/sparkctl sim destroy --name demo
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
bin=./${SPARK_BUILD_DIR:-build}/bin
name=demo
seed=/run/sparkctl-sim/$name/cluster.yaml
profile=profiles/qwen3-tiny-demo.yaml

step() { printf '\n== %s\n' "$*"; }

step "1/6 Validating the shipped profiles"
$bin/sparkctl profile check profiles/*.yaml

step "2/6 A simulated four-node ring (sparkctl sim create)"
if [ -f "$seed" ] && $bin/sparkctl sim status --json | grep -q "\"inventory\": \"$seed\""; then
  echo "cluster '$name' already exists: $seed"
else
  $bin/sparkctl sim create --name "$name" --nodes 4 --topology ring
fi

step "3/6 Discovery: identities, cabling, ring order (sparkctl discover)"
$bin/sparkctl discover -c "$seed"

step "4/6 Preflight: every known trap on every node (sparkctl preflight)"
$bin/sparkctl preflight -c "$seed" -p "$profile"

if $bin/sparkctl --help | grep -q '^  net '; then
  step "5/6 Fabric: addresses, routes, MTU, WireGuard (sparkctl net apply / verify)"
  $bin/sparkctl net apply -c "$seed" --yes
  $bin/sparkctl net verify -c "$seed"
fi

step "6/6 The tiny demo model (random weights: expect gibberish) on the CPU engine, TP=4"
model=${SPARK_BUILD_DIR:-build}/demo-model
if [ ! -f "$model/config.json" ]; then
  python3 scripts/make_demo_model.py "$model"
fi
$bin/spark-engine generate --model "$model" --prompt "Hello from a simulated Spark ring" \
  --max-tokens 16 --temperature 0 --tp 4

printf '\nDone. Inventory: %s. Clean up: %s/sparkctl sim destroy --name %s\n' "$seed" "$bin" "$name"
