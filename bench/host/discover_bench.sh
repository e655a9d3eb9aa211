#!/usr/bin/env bash
# discover + preflight on a simulated ring: wall time of each, over several runs.
# Usage (root): bench/host/discover_bench.sh [SPARKCTL] [NODES...]   (default: build/bin/sparkctl 4 8)
# Prints a table and writes bench/host/results.json. Targets (issue): 4 nodes < 5 s, 8 nodes < 8 s.
set -euo pipefail
cd "$(dirname "$0")/../.."
sparkctl=${1:-build/bin/sparkctl}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(4 8)
runs=${RUNS:-3}
out=bench/host/results.json
now() { date +%s.%N; }
rows=()
printf '%-6s %-4s %-12s %-12s %-12s\n' nodes run discover_s preflight_s total_s
for n in "${sizes[@]}"; do
  name=bench$n
  $sparkctl sim destroy --name "$name" >/dev/null 2>&1 || true
  $sparkctl sim create --name "$name" --nodes "$n" --topology ring >/dev/null
  seed=/run/sparkctl-sim/$name/cluster.yaml
  for r in $(seq 1 "$runs"); do
    t0=$(now); $sparkctl discover -c "$seed" >/dev/null
    t1=$(now); $sparkctl preflight -c "$seed" -p profiles/qwen3-tiny-demo.yaml >/dev/null || true
    t2=$(now)
    d=$(awk "BEGIN{print $t1 - $t0}"); p=$(awk "BEGIN{print $t2 - $t1}"); t=$(awk "BEGIN{print $t2 - $t0}")
    printf '%-6s %-4s %-12.2f %-12.2f %-12.2f\n' "$n" "$r" "$d" "$p" "$t"
    rows+=("{\"nodes\": $n, \"run\": $r, \"discover_s\": $d, \"preflight_s\": $p, \"total_s\": $t}")
  done
  $sparkctl sim destroy --name "$name" >/dev/null
done
{
  echo "{\"benchmark\": \"discover+preflight on a simulated ring\", \"cores\": $(nproc),"
  echo " \"load_before\": \"$(cut -d' ' -f1-3 /proc/loadavg)\", \"runs\": ["
  (IFS=,; echo "  ${rows[*]}")
  echo "]}"
} > "$out"
echo "wrote $out"
