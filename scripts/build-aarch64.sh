#!/usr/bin/env bash
# Cross-builds sparkctl for aarch64 (a DGX Spark's CPU) on an x86-64 Debian 12 machine: the
# programs without CUDA (sparkctl, spark-engine with the CPU backend, spark-bench) and the unit
# tests that run under emulation (tests/emulated_tests.cmake), into ./build-aarch64
# ($SPARK_AARCH64_BUILD_DIR). Then this machine's own sparkctl (./build, see scripts/build.sh)
# bundles the aarch64 programs with their arm64 libraries into build-aarch64/bundle.
# Needs the cross toolchain of scripts/install-deps.sh. The CUDA engine for the GB10 is built
# on a Spark: scripts/build-spark.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${SPARK_AARCH64_BUILD_DIR:-build-aarch64}"
if ! command -v aarch64-linux-gnu-g++ >/dev/null; then
  echo "build-aarch64: no aarch64-linux-gnu-g++: run scripts/install-deps.sh (Debian 12, x86-64)" >&2
  exit 2
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S . -B "$build_dir" "${generator[@]}" --toolchain cmake/toolchains/aarch64-linux-gnu.cmake \
    -DCMAKE_BUILD_TYPE=${SPARK_BUILD_TYPE:-Release} -DSPARK_CUDA=OFF "${launcher[@]}"
fi
cmake --build "$build_dir" -j"${SPARK_JOBS:-2}" \
  --target sparkctl spark-engine spark-bench nccl_tuner_spark emulated_tests

host_sparkctl="./${SPARK_BUILD_DIR:-build}/bin/sparkctl"
if [ ! -x "$host_sparkctl" ]; then
  echo "build-aarch64: $host_sparkctl is missing, so no bundle was made (run scripts/build.sh)" >&2
  exit 0
fi
rm -rf "$build_dir/bundle"
"$host_sparkctl" bundle make --from "$build_dir/bin" --out "$build_dir/bundle"
