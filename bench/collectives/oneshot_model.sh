#!/usr/bin/env bash
# The one-shot transport's latency model (docs/comm.md, "Latency model"): measures what this
# machine has and projects a 4-Spark ring over RDMA from it and the field's wire figures.
#   1. oneshot_latency: ranks as threads over loopback sockets: a pair (the software cost of a
#      call), four ranks as a mesh (one hop) and as a ring (two hops, relayed): the relay's cost
#      at an equal rank count;
#   2. with root: a simulated pair, a switched four (mesh), rings of four and eight:
#      `sparkctl bench allreduce --transport oneshot` (and gloo) over the veth cables (socket
#      wire) at 4 KiB, 10 KiB and 64 KiB, REPEAT times each, and `sparkctl bench link` for one
#      cable's one-way latency;
#   3. oneshot_model.py: prints the table and writes bench/results/oneshot_model.json.
# Usage (from the repository root, after ./scripts/build.sh):
#   sudo bench/collectives/oneshot_model.sh [BUILD_DIR] [REPEAT]
set -euo pipefail
build=${1:-build}
repeat=${2:-3}
out=$(mktemp -d /tmp/oneshot-model.XXXXXX)
here=$(cd "$(dirname "$0")" && pwd)
sizes="4K 10K 64K"
for bin in oneshot_latency sparkctl spark-bench; do
  [ -x "$build/bin/$bin" ] || { echo "oneshot_model: no $build/bin/$bin (build first)" >&2; exit 2; }
done
echo "# machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r)"
for spec in "2 mesh pair" "4 mesh mesh4" "4 ring ring4"; do
  set -- $spec
  "$build/bin/oneshot_latency" --ranks "$1" --topology "$2" --iters 3000 --sizes 4K,10K,64K \
    --json "$out/loop_$3.json"
done
# One run of `sparkctl bench allreduce ARGS` into FILE, retried once; a run that fails twice (a
# rank starved past the rendezvous deadline on a busy host) is left out and said so.
sample() {
  local file=$1
  shift
  "$build/bin/sparkctl" bench allreduce "$@" --collective-timeout 60 --json > "$file" 2>/dev/null ||
    "$build/bin/sparkctl" bench allreduce "$@" --collective-timeout 60 --json > "$file" ||
    { rm -f "$file"; echo "# left out (failed twice): bench allreduce $*"; }
}
if [ "$(id -u)" -eq 0 ]; then
  for spec in "2 pair" "4 switched" "4 ring" "8 ring"; do
    set -- $spec
    tag=$1
    if [ "$2" = switched ]; then tag="${1}s"; fi
    name="osm$tag"
    seed="/run/sparkctl-sim/$name/cluster.yaml"
    "$build/bin/sparkctl" sim destroy --name "$name" >/dev/null 2>&1 || true
    step() {  # a step of the cluster's set-up, retried once (a busy host can time one out)
      "$@" > "$out/setup.log" 2>&1 || "$@" > "$out/setup.log" 2>&1 ||
        { echo "oneshot_model: '$*' failed for $name:" >&2; tail -5 "$out/setup.log" >&2; exit 2; }
    }
    step "$build/bin/sparkctl" sim create --name "$name" --nodes "$1" --topology "$2"
    step "$build/bin/sparkctl" discover -c "$seed"
    step "$build/bin/sparkctl" net apply -c "$seed" --yes
    for ((i = 1; i <= repeat; i++)); do
      for size in $sizes; do
        sample "$out/sim${tag}_oneshot_${size}_$i.json" -c "$seed" --transport oneshot \
          -b "$size" -e "$size" -n 500 -w 50
        sample "$out/sim${tag}_gloo_${size}_$i.json" -c "$seed" --transport gloo \
          -b "$size" -e "$size" -n 50 -w 5
      done
    done
    [ "$1" = 2 ] && "$build/bin/sparkctl" bench link -c "$seed" --tcp --seconds 0.5 --json \
      > "$out/sim2_link.json"
    "$build/bin/sparkctl" sim destroy --name "$name" >/dev/null
  done
else
  echo "# not root: the simulator part is skipped (its rows show as not measured)"
fi
python3 "$here/oneshot_model.py" "$out" "$(dirname "$here")/results/oneshot_model.json"
