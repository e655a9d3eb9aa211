#!/usr/bin/env bash
# Sets everything up and runs the main job on the embedded default: the tiny demo profile.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
sparkctl=./build/bin/sparkctl
echo "== Validating the shipped profiles"
$sparkctl profile check profiles/*.yaml
echo "== The embedded default, fully resolved"
$sparkctl profile show profiles/qwen3-tiny-demo.yaml
