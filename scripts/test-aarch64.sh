#!/usr/bin/env bash
# The aarch64 step of the tests: cross-build (scripts/build-aarch64.sh), run the emulated unit
# tests (ctest label aarch64, each test binary under qemu-aarch64-static through CMake's
# CROSSCOMPILING_EMULATOR), then check the aarch64 bundle: its manifest against its files, and
# that the aarch64 dynamic loader (under qemu) takes every bundled library from the bundle and
# the programs start. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build-aarch64.sh
build_dir="${SPARK_AARCH64_BUILD_DIR:-build-aarch64}"
host_sparkctl="./${SPARK_BUILD_DIR:-build}/bin/sparkctl"
rc=0
(cd "$build_dir" && ctest -L aarch64 --output-on-failure --timeout 1200 -j"${SPARK_JOBS:-2}" \
  --output-junit ctest-junit.xml "$@") || rc=$?

bundle="$(cd "$build_dir" && pwd)/bundle"  # absolute: the loader prints absolute paths
if [ -x "$host_sparkctl" ]; then
  "$host_sparkctl" bundle show "$bundle" --verify >/dev/null || rc=1
  for program in sparkctl spark-engine spark-bench; do
    trace=$(qemu-aarch64-static -E LD_TRACE_LOADED_OBJECTS=1 "$bundle/bin/$program" 2>&1) || {
      echo "test-aarch64: the aarch64 loader cannot load $program:" >&2; echo "$trace" >&2; rc=1; }
    for lib in "$bundle"/lib/*; do
      name=$(basename "$lib")
      if echo "$trace" | grep -q "^[[:space:]]*$name => " &&
        ! echo "$trace" | grep -qF "$name => $bundle/bin/../lib/$name "; then
        echo "test-aarch64: $program takes $name from outside the bundle:" >&2
        echo "$trace" | grep "$name" >&2
        rc=1
      fi
    done
    qemu-aarch64-static "$bundle/bin/$program" --help >/dev/null ||
      { echo "test-aarch64: $bundle/bin/$program --help failed under qemu" >&2; rc=1; }
  done
  plugin="$bundle/lib/libnccl-tuner-spark.so"
  if ! readelf -h "$plugin" 2>/dev/null | grep -q AArch64; then
    echo "test-aarch64: $plugin is missing or not an aarch64 library" >&2; rc=1
  fi
  [ "$rc" -eq 0 ] && echo "test-aarch64: bundle $bundle checked"
fi
exit "$rc"
