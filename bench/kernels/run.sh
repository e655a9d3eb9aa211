#!/usr/bin/env bash
# Runs the kernel benchmark on this machine's first GPU (and PyTorch's SDPA for the prefill
# attention comparison) and writes
# bench/results/kernels_<gpu>.json (default name kernels_h200.json; pass another path to override).
# Usage: bench/kernels/run.sh [OUT.json]   (after ./scripts/build.sh with CUDA on)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${SPARK_BUILD_DIR:-build}/bin/spark-kernel-bench"
[ -x "$bin" ] || { echo "run.sh: $bin not found; build with CUDA first (SPARK_CUDA=ON ./scripts/build.sh)" >&2; exit 2; }
out="${1:-bench/results/kernels_h200.json}"
mkdir -p "$(dirname "$out")"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader >&2 || true
"$bin" --json "$out"
# The PyTorch flash-attention figure for the prefill comparison, when torch is installed.
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  python3 bench/kernels/sdpa_peer.py "$out"
fi
echo "wrote $out" >&2
