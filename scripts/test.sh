#!/usr/bin/env bash
# Sets everything up and runs every test: Debian packages, build, then ctest.
# Labels: unit, sim (needs root and network namespaces), gpu (needs a CUDA device), e2e.
# Tests that cannot run here (no root, no GPU) are reported as skipped, not passed.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/install-test-python.sh
./scripts/build.sh
cd "${SPARK_BUILD_DIR:-build}"
ctest --output-on-failure --timeout 900 "$@"
