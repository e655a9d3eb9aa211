#!/bin/bash
# `sparkctl up` on a simulated 4-node ring with the tiny demo model on the CPU engine, timed from
# a created (and discovered) simulator to a ready endpoint (target: under 60 s), then a second
# `up` (already up), `status` and `down`. Needs root and built sparkctl + spark-engine.
# Usage: bench/up/up_bench.sh [BUILD_DIR]   (default build-up; RUNS=3 for more samples;
#        ENGINE=PATH to install another spark-engine than BUILD_DIR/bin/spark-engine)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build-up}
BIN=$BUILD/bin/sparkctl
NAME=${UP_BENCH_NAME:-upbench}
RUNS=${RUNS:-1}
SEED=/run/sparkctl-sim/$NAME/cluster.yaml
WORK=$(mktemp -d /tmp/$NAME-XXXX)
MODEL=$PWD/$BUILD/up-bench-model
cleanup() {
  "$BIN" down -c "$SEED" --state-root "$WORK/state" >/dev/null 2>&1 || true
  "$BIN" sim destroy --name "$NAME" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
[ -f "$MODEL/config.json" ] || python3 scripts/make_demo_model.py "$MODEL" >/dev/null
sed "s|path: /var/lib/sparkctl/models/sparkctl--qwen3-tiny-demo|path: $MODEL|" \
  profiles/qwen3-tiny-demo.yaml > "$WORK/profile.yaml"
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.1f}')"; }
for run in $(seq "$RUNS"); do
  "$BIN" sim destroy --name "$NAME" >/dev/null 2>&1 || true
  t0=$(now); "$BIN" sim create --name "$NAME" --nodes 4 --topology ring >/dev/null
  "$BIN" discover -c "$SEED" >/dev/null; t1=$(now)
  "$BIN" up -c "$SEED" -p "$WORK/profile.yaml" --state-root "$WORK/state" --yes --json \
    ${ENGINE:+--engine "$ENGINE"} > "$WORK/up.json"; t2=$(now)
  "$BIN" up -c "$SEED" -p "$WORK/profile.yaml" --state-root "$WORK/state" --yes --json \
    ${ENGINE:+--engine "$ENGINE"} > "$WORK/again.json"; t3=$(now)
  "$BIN" status -c "$SEED" --state-root "$WORK/state" >/dev/null; t4=$(now)
  "$BIN" down -c "$SEED" --state-root "$WORK/state" >/dev/null; t5=$(now)
  steps=$(python3 -c "import json; print(' '.join(f\"{s['name']}={s['seconds']:.1f}\" for s in json.load(open('$WORK/up.json'))['steps']))")
  again=$(python3 -c "import json; print(json.load(open('$WORK/again.json'))['action'])")
  echo "run $run: sim create+discover $(secs $t0 $t1) s | up to ready $(secs $t1 $t2) s ($steps)" \
       "| up again $(secs $t2 $t3) s ($again) | status $(secs $t3 $t4) s | down $(secs $t4 $t5) s"
done
