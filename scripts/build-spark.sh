#!/usr/bin/env bash
# Builds sparkctl natively on a DGX Spark (aarch64, DGX OS 7 = Ubuntu 24.04): every program, with
# the CUDA backend and kernels for the GB10 (sm_121) and NCCL, into ./build ($SPARK_BUILD_DIR);
# then bundles the programs with the libraries DGX OS lacks into build/bundle, which is what the
# other Sparks get (sparkctl installs it on each node by itself when it runs on this Spark; copy
# it to an x86-64 controller and name it in SPARKCTL_BUNDLES otherwise). docs/platforms.md.
#
#   ./scripts/build-spark.sh            # install packages, configure, build, bundle
#   SPARK_JOBS=8 ./scripts/build-spark.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${SPARK_BUILD_DIR:-build}"
if [ "$(uname -m)" != aarch64 ]; then
  echo "build-spark: this is $(uname -m); run it on a DGX Spark. Here: scripts/build.sh, or" \
    "scripts/build-aarch64.sh for an aarch64 build without CUDA" >&2
  exit 2
fi
./scripts/install-deps.sh
nvcc="${CUDACXX:-/usr/local/cuda/bin/nvcc}"
if [ ! -x "$nvcc" ]; then
  echo "build-spark: no CUDA compiler at $nvcc: DGX OS ships the CUDA toolkit in /usr/local/cuda" \
    "(apt install cuda-toolkit-13-0), or set CUDACXX" >&2
  exit 2
fi
cuda_lib="$(dirname "$(dirname "$nvcc")")"
if ! ls "$cuda_lib"/include/nccl.h /usr/include/nccl.h >/dev/null 2>&1; then
  echo "build-spark: NCCL's headers are missing (nccl.h): apt install libnccl2 libnccl-dev" \
    "(NVIDIA's CUDA repository, which DGX OS has configured)" >&2
  exit 2
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
launcher=()
command -v ccache >/dev/null &&
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  # sm_121 only: the GB10. (A build for the H200 test machines adds 90.)
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DSPARK_CUDA=ON \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES=121 "${launcher[@]}"
fi
cmake --build "$build_dir" -j"${SPARK_JOBS:-$(nproc)}"
rm -rf "$build_dir/bundle"
"$build_dir/bin/sparkctl" bundle make --out "$build_dir/bundle"
cat <<MSG

Next:
  $build_dir/bin/spark-engine info --json | head        # backends: cpu, cuda
  (cd $build_dir && ctest -L gpu)                       # the GPU tests on this GB10
  $build_dir/bin/sparkctl discover --hosts spark-1,spark-2,... --accept-new   # README
MSG
