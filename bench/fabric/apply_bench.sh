#!/bin/bash
# plan + apply + verify on a simulated 4-node ring, timed (target: under 15 s in total), then a
# second apply (0 changes) and reset. Needs root. Usage: bench/fabric/apply_bench.sh [SPARKCTL]
set -euo pipefail
BIN=${1:-${SPARKCTL:-build-fabric/bin/sparkctl}}
NAME=${FABRIC_BENCH_NAME:-fabbench}
NODES=${FABRIC_BENCH_NODES:-4}
INV=$(mktemp /tmp/$NAME-XXXX.yaml)
cleanup() { "$BIN" sim destroy --name "$NAME" >/dev/null 2>&1 || true; rm -f "$INV"; }
trap cleanup EXIT
"$BIN" sim destroy --name "$NAME" >/dev/null 2>&1 || true
"$BIN" sim create --name "$NAME" --nodes "$NODES" --topology ring >/dev/null

# The simulator's patch panel keeps the 1500-byte default; DAC cables and switch ports carry
# jumbo frames, so raise it (else verify's DF pings fail and apply rolls back).
WIRES=$("$BIN" sim status --name "$NAME" --json |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["clusters"][0]["wires_namespace"])')
for dev in $(ip -n "$WIRES" -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -v '^lo$'); do
  ip -n "$WIRES" link set "$dev" mtu 9216 2>/dev/null || true
done
for dev in $(ip -n "$WIRES" -o link show type bridge | awk -F': ' '{print $2}'); do
  ip -n "$WIRES" link set "$dev" mtu 9216 2>/dev/null || true
done

# What `sparkctl discover` will write: ranks, ring cabling (p0 of r to p1 of r+1), fabric kind.
python3 - "/run/sparkctl-sim/$NAME/cluster.yaml" "$INV" "$NODES" <<'PY'
import sys
seed, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines, rank = [], -1
for line in open(seed):
    lines.append(line.rstrip("\n"))
    if line.startswith("    address:"):
        rank += 1
        lines += [f"    rank: {rank}", "    ports:",
                  "      - name: p0", f"        peer: {{node: spark-{(rank + 1) % n}, port: p1}}",
                  "      - name: p1", f"        peer: {{node: spark-{(rank - 1) % n}, port: p0}}"]
lines += ["fabric:", "  kind: ring"]
open(out, "w").write("\n".join(lines) + "\n")
PY

now() { date +%s.%N; }
t0=$(now); "$BIN" net plan -c "$INV" >/dev/null
t1=$(now); "$BIN" net apply -c "$INV" --yes >/dev/null
t2=$(now); "$BIN" net verify -c "$INV" >/dev/null
t3=$(now); out=$("$BIN" net apply -c "$INV" --yes --json)
t4=$(now); "$BIN" net reset -c "$INV" --yes >/dev/null
t5=$(now)
second=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["plan"]["change_count"])')
awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" -v e="$t4" -v f="$t5" -v s="$second" -v n="$NODES" 'BEGIN {
  printf "ring of %d: plan %.2f s, apply %.2f s, verify %.2f s, total %.2f s (target < 15 s)\n",
         n, b-a, c-b, d-c, d-a;
  printf "second apply: %.2f s, %d changes; reset: %.2f s\n", e-d, s, f-e;
  exit (d-a < 15 && s == 0) ? 0 : 1 }'
