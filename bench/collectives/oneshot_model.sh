#!/usr/bin/env bash
# The one-shot transport's latency model (docs/comm.md, "Latency model"): measures what this
# machine has and projects a 4-Spark ring over RDMA from it and the field's wire figures.
#   1. oneshot_latency: ranks as threads over loopback sockets (software cost of a call; a ring
#      of four against a pair: the cost of a relay hop);
#   2. with root: a simulated pair and 4- and 8-node rings, `sparkctl bench allreduce --transport
#      oneshot` over the veth cables (socket wire), REPEAT times each, and `sparkctl bench link`
#      for one cable's one-way latency;
#   3. oneshot_model.py: prints the table and writes bench/results/oneshot_model.json.
# Usage (from the repository root, after ./scripts/build.sh):
#   sudo bench/collectives/oneshot_model.sh [BUILD_DIR] [REPEAT]
set -euo pipefail
build=${1:-build}
repeat=${2:-3}
out=$(mktemp -d /tmp/oneshot-model.XXXXXX)
here=$(cd "$(dirname "$0")" && pwd)
sizes="-b 4K -e 64K -f 2"
for bin in oneshot_latency sparkctl spark-bench; do
  [ -x "$build/bin/$bin" ] || { echo "oneshot_model: no $build/bin/$bin (build first)" >&2; exit 2; }
done
echo "# machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r)"
"$build/bin/oneshot_latency" --ranks 2 --topology mesh --iters 3000 --json "$out/loop_pair.json"
"$build/bin/oneshot_latency" --ranks 4 --topology ring --iters 3000 --json "$out/loop_ring4.json"
if [ "$(id -u)" -eq 0 ]; then
  for spec in "2 pair" "4 ring" "8 ring"; do
    set -- $spec
    name="osm$1"
    seed="/run/sparkctl-sim/$name/cluster.yaml"
    "$build/bin/sparkctl" sim destroy --name "$name" >/dev/null 2>&1 || true
    "$build/bin/sparkctl" sim create --name "$name" --nodes "$1" --topology "$2" >/dev/null
    "$build/bin/sparkctl" discover -c "$seed" >/dev/null
    "$build/bin/sparkctl" net apply -c "$seed" --yes >/dev/null
    for ((i = 1; i <= repeat; i++)); do
      "$build/bin/sparkctl" bench allreduce -c "$seed" --transport oneshot $sizes -n 500 -w 50 \
        --json > "$out/sim${1}_oneshot_$i.json"
      "$build/bin/sparkctl" bench allreduce -c "$seed" --transport gloo $sizes -n 100 -w 10 \
        --json > "$out/sim${1}_gloo_$i.json"
    done
    [ "$1" = 2 ] && "$build/bin/sparkctl" bench link -c "$seed" --tcp --seconds 0.5 --json \
      > "$out/sim2_link.json"
    "$build/bin/sparkctl" sim destroy --name "$name" >/dev/null
  done
else
  echo "# not root: the simulator part is skipped (its rows show as not measured)"
fi
python3 "$here/oneshot_model.py" "$out" "$(dirname "$here")/results/oneshot_model.json"
