#!/usr/bin/env bash
# Packs binaries of a CUDA build, stripped, with the shared libraries they link (ldd) other than
# the C runtime and the NVIDIA stack, into one tar.xz: a GPU machine with the driver, the CUDA 13
# runtime, cuBLAS and NCCL (a CUDA toolkit, or the nvidia-* Python wheels) but none of our build
# dependencies runs them. The bundle's `run` sets LD_LIBRARY_PATH (the bundle's lib/, then the
# CUDA libraries it finds: the Python wheels' nvidia/*/lib, /usr/local/cuda/lib64) and runs its
# arguments with the bundle's bin/ first on PATH and the fixtures' source tree as the working
# directory's fallback.
# Usage: scripts/gpu-bundle.sh BUILD_DIR OUT.tar.xz [BINARY ...]
#   BINARY: a path under BUILD_DIR (default: every test binary with a gpu label, spark-engine and
#   the GPU benchmarks).
# Example: scripts/gpu-bundle.sh build-sm90 /tmp/gpu.tar.xz && (on the GPU machine)
#   mkdir b && tar xJf gpu.tar.xz -C b && b/run engine_backend_cuda_test
set -euo pipefail
build="${1:?usage: gpu-bundle.sh BUILD_DIR OUT.tar.xz [BINARY ...]}"
out="${2:?usage: gpu-bundle.sh BUILD_DIR OUT.tar.xz [BINARY ...]}"
shift 2
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
  while read -r name; do bins+=("tests/$name"); done < <(
    cd "$build" && ctest -N -L gpu 2>/dev/null | sed -n 's/^ *Test *#[0-9]*: \([^.]*\)\..*/\1/p' | sort -u)
  for b in bin/spark-engine bin/spark-decode-bench bin/spark-kernel-bench bin/spark-deepseek-bench; do
    [ -x "$build/$b" ] && bins+=("$b")
  done
fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
skip='^(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|ld-linux|linux-vdso|libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvidia)[.-]'
for b in "${bins[@]}"; do
  [ -x "$build/$b" ] || { echo "gpu-bundle.sh: $build/$b is not a built binary" >&2; exit 2; }
  cp "$build/$b" "$stage/bin/"
  strip "$stage/bin/$(basename "$b")"
  ldd "$build/$b" | awk '/=> \//{print $1, $3}' | while read -r name path; do
    [[ "$name" =~ $skip ]] || cp -L "$path" "$stage/lib/$name"
  done
done
cat > "$stage/run" <<'EOF'
#!/usr/bin/env bash
# Runs a command with the bundle's binaries and libraries (see scripts/gpu-bundle.sh).
here="$(cd "$(dirname "$0")" && pwd)"
libs="$here/lib"
for d in $(python3 -c 'import glob, os, site; print(" ".join(sorted(set(os.path.dirname(p) for s in site.getsitepackages() for p in glob.glob(os.path.join(s, "nvidia", "*", "lib", "*.so*"))))))' 2>/dev/null) /usr/local/cuda/lib64; do
  [ -d "$d" ] && libs="$libs:$d"
done
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$here/bin:$PATH"
exec "$@"
EOF
chmod +x "$stage/run"
tar -C "$stage" -cJf "$out" .
echo "gpu-bundle.sh: ${#bins[@]} binaries, $(ls "$stage/lib" | wc -l) libraries -> $out ($(du -h "$out" | cut -f1))" >&2
