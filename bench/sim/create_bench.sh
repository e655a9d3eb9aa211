#!/usr/bin/env bash
# Measures `sparkctl sim create` and `sparkctl sim destroy` wall-clock times for rings of the
# given sizes (default: 4 and 8 nodes), REPEAT times each, and prints one line per run plus the
# median. Needs root. Usage:
#   sudo bench/sim/create_bench.sh [SPARKCTL_BINARY] [REPEAT] [SIZES...]
#   sudo bench/sim/create_bench.sh build/bin/sparkctl 3 4 8
set -euo pipefail

sparkctl=${1:-build/bin/sparkctl}
repeat=${2:-3}
shift $(( $# > 2 ? 2 : $# ))
sizes=("${@:-4}")
[ $# -eq 0 ] && sizes=(4 8)
name=bench
[ "$(id -u)" -eq 0 ] || { echo "create_bench: needs root" >&2; exit 2; }
[ -x "$sparkctl" ] || { echo "create_bench: no sparkctl at $sparkctl (build it first)" >&2; exit 2; }

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "# sparkctl sim create/destroy, $(nproc) cores, $(uname -r)"
printf '%-6s %-4s %10s %10s\n' nodes run create_s destroy_s
for n in "${sizes[@]}"; do
  creates=(); destroys=()
  for ((i = 1; i <= repeat; i++)); do
    t0=$(now)
    "$sparkctl" sim create --name "$name" --nodes "$n" --topology ring >/dev/null
    t1=$(now)
    "$sparkctl" sim destroy --name "$name" >/dev/null
    t2=$(now)
    c=$(awk "BEGIN {print $t1 - $t0}"); d=$(awk "BEGIN {print $t2 - $t1}")
    creates+=("$c"); destroys+=("$d")
    printf '%-6s %-4s %10.2f %10.2f\n' "$n" "$i" "$c" "$d"
  done
  printf '%-6s %-4s %10.2f %10.2f\n' "$n" med "$(printf '%s\n' "${creates[@]}" | median)" \
    "$(printf '%s\n' "${destroys[@]}" | median)"
done
