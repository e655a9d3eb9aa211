#!/usr/bin/env bash
# Builds and runs the server benchmark: prints a table and writes bench/server/results.json.
# Usage: bench/server/run.sh [build-dir] [--clients N] [--tokens T]
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
shift || true
cmake --build "$build" --target server_bench -j"${SPARK_JOBS:-2}"
"$build/bin/server_bench" --json bench/server/results.json "$@"
