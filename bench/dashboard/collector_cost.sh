#!/usr/bin/env bash
# The dashboard collector's own cost on a simulated ring of four serving the demo model: CPU of
# the collector (the `sparkctl dashboard --ticks N` process) and of each node's side of the probe
# (its sshd and the shell and tools they run, from the sshd processes' own and reaped children's
# CPU in /proc/PID/stat), and the bytes over SSH (probe commands and answers, payload). Prints a
# table and writes JSON to bench/results/dashboard-collector-<date>.json.
# The nodes' figure is the sshd CPU while the collector runs less the same time without it.
#   sudo bench/dashboard/collector_cost.sh [BUILD_DIR]        TICKS=60 (default)
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
sc="$build/bin/sparkctl"
engine="${ENGINE:-$build/bin/spark-engine}"
ticks="${TICKS:-60}"
name=dashbench
work="$build/dashboard-bench"
seed="/run/sparkctl-sim/$name/cluster.yaml"
flags="-c $seed --state-root $work/state"
mkdir -p "$work" bench/results
[ -f "$work/model/config.json" ] || python3 scripts/make_demo_model.py "$work/model" >/dev/null
sed "s|^  path: .*|  path: $PWD/$work/model|" profiles/qwen3-tiny-demo.yaml > "$work/profile.yaml"

cleanup() { "$sc" down $flags >/dev/null 2>&1 || true; "$sc" sim destroy --name $name >/dev/null 2>&1 || true; }
trap cleanup EXIT
"$sc" sim destroy --name $name >/dev/null 2>&1 || true
"$sc" sim create --name $name --nodes 4 --topology ring >/dev/null
"$sc" discover -c "$seed" >/dev/null
"$sc" up $flags -p "$work/profile.yaml" --yes --json --timeout 240 --engine "$engine" > "$work/up.json"

hz=$(getconf CLK_TCK)
# CPU seconds of every sshd in a node's namespace: utime+stime+cutime+cstime (fields 14-17).
node_cpu() {
  local t=0 pid
  for pid in $(ip netns pids "sparksim-$name-$1"); do
    [ "$(cat /proc/$pid/comm 2>/dev/null)" = sshd ] || continue
    t=$((t + $(awk '{print $14+$15+$16+$17}' /proc/$pid/stat)))
  done
  echo "$t"
}
nodes=(spark-0 spark-1 spark-2 spark-3)
declare -A before
for n in "${nodes[@]}"; do before[$n]=$(node_cpu "$n"); done
start=$(date +%s.%N)
/usr/bin/time -f '%U %S' -o "$work/time.txt" "$sc" dashboard $flags --ticks "$ticks" --json > "$work/run.json"
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
read -r user sys < "$work/time.txt"

declare -A used
for n in "${nodes[@]}"; do used[$n]=$(( $(node_cpu "$n") - ${before[$n]} )); done
# The baseline: the same time with no collector (the monitor that `up` started probes every
# second too, through the same sshd).
for n in "${nodes[@]}"; do before[$n]=$(node_cpu "$n"); done
sleep "$elapsed"
python3 - "$work/run.json" "$elapsed" "$user" "$sys" "$hz" "$ticks" \
  $(for n in "${nodes[@]}"; do echo "$n" "${used[$n]}" "$(( $(node_cpu "$n") - ${before[$n]} ))"; done) <<'PY'
import datetime, json, sys
run = json.load(open(sys.argv[1]))
elapsed, user, sys_s, hz, ticks = float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
rest = sys.argv[7:]
with_collector = {rest[i]: int(rest[i + 1]) / hz for i in range(0, len(rest), 3)}
baseline = {rest[i]: int(rest[i + 2]) / hz for i in range(0, len(rest), 3)}
nodes = {n: with_collector[n] - baseline[n] for n in with_collector}
res = {
    "schema": "sparkctl-bench-dashboard/v1",
    "date": datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z",
    "ticks": run["ticks"], "elapsed_s": elapsed,
    "controller_cpu_s": user + sys_s,
    "controller_cpu_percent": 100 * (user + sys_s) / elapsed,
    "node_cpu_s": nodes,
    "node_cpu_s_with_collector": with_collector,
    "node_cpu_s_baseline": baseline,
    "node_cpu_percent": {n: 100 * c / elapsed for n, c in nodes.items()},
    "ssh_bytes_sent_per_tick": run["ssh_bytes_sent"] / run["ticks"],
    "ssh_bytes_received_per_tick": run["ssh_bytes_received"] / run["ticks"],
    "health": run["snapshot"]["status"]["health"],
}
print(f"{ticks} ticks in {elapsed:.1f} s, model {res['health']}")
print(f"{'':24}{'CPU s':>8}{'CPU %':>8}{'with':>8}{'without':>9}  (node: with - without the collector)")
print(f"{'controller (collector)':24}{res['controller_cpu_s']:8.2f}{res['controller_cpu_percent']:8.2f}")
for n in nodes:
    print(f"{n + ' (sshd + probe)':24}{nodes[n]:8.2f}{res['node_cpu_percent'][n]:8.2f}"
          f"{with_collector[n]:8.2f}{baseline[n]:9.2f}")
print(f"SSH payload per tick: {res['ssh_bytes_sent_per_tick']:.0f} B sent, "
      f"{res['ssh_bytes_received_per_tick']:.0f} B received (all nodes)")
out = f"bench/results/dashboard-collector-{res['date'][:10]}.json"
json.dump(res, open(out, "w"), indent=2)
print("wrote", out)
PY
