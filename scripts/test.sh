#!/usr/bin/env bash
# Sets everything up and runs every test: Debian packages, build, then ctest; then, on x86-64
# Debian, the aarch64 step (scripts/test-aarch64.sh: cross build, emulated unit tests).
# Labels: unit, sim (needs root and network namespaces), gpu (needs a CUDA device), e2e.
# Each test case is one ctest entry; a case that cannot run here reports itself skipped, not
# passed. Then scripts/check_skips.py fails the run for any skip whose reason this machine should
# satisfy (it runs as root with network namespaces and ../shared; only GPU cases may skip).
# SPARK_ALLOW_SKIP=REGEX accepts one more skip reason.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/install-test-python.sh
./scripts/build.sh
# The aarch64 step (cross build, emulated unit tests, bundle check) where install-deps set up
# the cross toolchain (x86-64 Debian); SPARK_AARCH64=0 leaves it out. Its cross build runs at the
# lowest CPU priority beside the tests below, which mostly wait on simulated nodes: they take the
# CPU first, and the build uses what they leave.
aarch64=0
if [ "${SPARK_AARCH64:-1}" != 0 ] && command -v aarch64-linux-gnu-g++ >/dev/null &&
  command -v qemu-aarch64-static >/dev/null; then
  aarch64=1
fi
cross_log="${SPARK_AARCH64_BUILD_DIR:-build-aarch64}.log"
cross_pid=""
if [ "$aarch64" = 1 ]; then
  nice -n 19 ./scripts/build-aarch64.sh > "$cross_log" 2>&1 &
  cross_pid=$!
fi
cd "${SPARK_BUILD_DIR:-build}"
rc=0
ctest --output-on-failure --timeout 900 --output-junit ctest-junit.xml "$@" || rc=$?
allow=()
[ -n "${SPARK_ALLOW_SKIP:-}" ] && allow=(--allow "$SPARK_ALLOW_SKIP")
python3 ../scripts/check_skips.py ctest-junit.xml "${allow[@]}" || rc=$((rc == 0 ? 1 : rc))
cd ..
if [ "$aarch64" = 1 ]; then
  if ! wait "$cross_pid"; then
    echo "test.sh: the aarch64 cross build failed ($cross_log):" >&2
    tail -40 "$cross_log" >&2
    rc=$((rc == 0 ? 1 : rc))
  fi
  ./scripts/test-aarch64.sh || rc=$((rc == 0 ? 1 : rc))
  python3 scripts/check_skips.py "${SPARK_AARCH64_BUILD_DIR:-build-aarch64}/ctest-junit.xml" \
    "${allow[@]}" || rc=$((rc == 0 ? 1 : rc))
fi
exit "$rc"
