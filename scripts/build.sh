#!/usr/bin/env bash
# Configures and builds sparkctl into ./build (or $SPARK_BUILD_DIR). CUDA is compiled when nvcc is
# found (SPARK_CUDA=AUTO); override with SPARK_CUDA=OFF|ON in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${SPARK_BUILD_DIR:-build}"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
launcher=()
command -v ccache >/dev/null &&
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=${SPARK_BUILD_TYPE:-Release} \
    -DSPARK_CUDA="${SPARK_CUDA:-AUTO}" "${launcher[@]}"
fi
cmake --build "$build_dir" -j"${SPARK_JOBS:-2}"
