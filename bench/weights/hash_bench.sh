#!/usr/bin/env bash
# Weights verify throughput: ours vs cores x single-thread `sha256sum`.
#
# Creates FILES x SIZE_MIB MiB of pseudo-random data (under /dev/shm when it has room, else /tmp),
# then measures:
#   1. single-thread coreutils sha256sum over all files (its output is the manifest: SHA256SUMS),
#   2. target = cores x (1), and for reference cores x `openssl speed` SHA-256,
#   3. `sparkctl weights verify` with an empty cache (first run) and again (warm cache).
# Prints a table and writes JSON. Targets: first run >= 90% of target; second < 1% of first.
#
# Usage: bench/weights/hash_bench.sh [--files N] [--size-mib M] [--dir D] [--sparkctl BIN]
#                                    [--out results.json] [--keep]
set -euo pipefail

FILES=4
SIZE_MIB=1024
DIR=""
SPARKCTL=""
OUT=""
KEEP=0
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

while [[ $# -gt 0 ]]; do
  case "$1" in
    --files) FILES="$2"; shift 2 ;;
    --size-mib) SIZE_MIB="$2"; shift 2 ;;
    --dir) DIR="$2"; shift 2 ;;
    --sparkctl) SPARKCTL="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "hash_bench: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [[ -z "$SPARKCTL" ]]; then
  for candidate in "$ROOT/build/bin/sparkctl" "$ROOT"/build-*/bin/sparkctl; do
    if [[ -x "$candidate" ]]; then SPARKCTL="$candidate"; break; fi
  done
fi
[[ -x "$SPARKCTL" ]] || { echo "hash_bench: no sparkctl binary; build it or pass --sparkctl" >&2; exit 2; }
OUT="${OUT:-$HERE/results-$(hostname -s).json}"

need_kib=$(( FILES * SIZE_MIB * 1024 + 262144 ))  # data + 256 MiB headroom
free_kib() { df -Pk "$1" | awk 'NR==2 {print $4}'; }
if [[ -z "$DIR" ]]; then
  for base in /dev/shm /tmp; do
    if [[ -d "$base" && $(free_kib "$base") -gt $need_kib ]]; then DIR="$base"; break; fi
  done
fi
[[ -n "$DIR" ]] || { echo "hash_bench: need $((need_kib / 1024)) MiB free in /dev/shm or /tmp; pass --dir" >&2; exit 2; }
WORK="$(mktemp -d "$DIR/sparkctl-hash-bench.XXXXXX")"
cleanup() { [[ $KEEP == 1 ]] || rm -rf "$WORK"; }
trap cleanup EXIT

now_ns() { date +%s%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", (b - a) / 1e9}'; }
rate_mib() { awk -v bytes="$1" -v s="$2" 'BEGIN {printf "%.1f", bytes / 1048576 / s}'; }

CORES=$(nproc)
BYTES=$(( FILES * SIZE_MIB * 1048576 ))
echo "hash_bench: $FILES x $SIZE_MIB MiB in $WORK, $CORES cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" >&2

mkdir -p "$WORK/model"
for i in $(seq 1 "$FILES"); do
  name=$(printf "model-%05d-of-%05d.safetensors" "$i" "$FILES")
  head -c $(( SIZE_MIB * 1048576 )) /dev/zero |
    openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass "pass:sparkctl-bench-$i" > "$WORK/model/$name"
done
created_ns=$(now_ns)

# 1. single-thread sha256sum; its output is the manifest (independent of our code).
t0=$(now_ns)
(cd "$WORK/model" && sha256sum -- *) > "$WORK/SHA256SUMS"
t1=$(now_ns)
SUM_S=$(secs "$t0" "$t1")
SUM_RATE=$(rate_mib "$BYTES" "$SUM_S")
TARGET_RATE=$(awk -v r="$SUM_RATE" -v c="$CORES" 'BEGIN {printf "%.1f", r * c}')

# 2. reference: OpenSSL's own single-thread SHA-256 speed (8 MiB blocks).
OPENSSL_RATE=$(cd "$WORK" && openssl speed -seconds 2 -bytes 8388608 -evp sha256 2>/dev/null |
  awk '/^sha256/ {v=$2; sub("k","",v); printf "%.1f", v * 1000 / 1048576}')
SHANI=$(grep -qw sha_ni /proc/cpuinfo && echo yes || echo no)
SUM_LIBCRYPTO=$(ldd "$(command -v sha256sum)" | grep -q libcrypto && echo yes || echo no)

# The cache does not trust files modified within 2 s of hashing (racy window); wait it out.
while (( $(now_ns) - created_ns < 3000000000 )); do sleep 0.2; done

# 3. ours: cold cache, then warm cache.
CACHE="$WORK/verify-cache.json"
t0=$(now_ns)
"$SPARKCTL" weights verify --manifest "$WORK/SHA256SUMS" --dir "$WORK/model" --cache "$CACHE" \
  --json --no-progress > "$WORK/first.json"
t1=$(now_ns)
"$SPARKCTL" weights verify --manifest "$WORK/SHA256SUMS" --dir "$WORK/model" --cache "$CACHE" \
  --json --no-progress > "$WORK/second.json"
t2=$(now_ns)
FIRST_S=$(secs "$t0" "$t1")
SECOND_S=$(secs "$t1" "$t2")
OURS_RATE=$(rate_mib "$BYTES" "$FIRST_S")
PCT_TARGET=$(awk -v a="$OURS_RATE" -v b="$TARGET_RATE" 'BEGIN {printf "%.1f", 100 * a / b}')
PCT_SECOND=$(awk -v a="$SECOND_S" -v b="$FIRST_S" 'BEGIN {printf "%.2f", 100 * a / b}')
grep -q '"ok": true' "$WORK/first.json" || { echo "hash_bench: first verify did not pass" >&2; exit 2; }
grep -q '"bytes_hashed": 0' "$WORK/second.json" || { echo "hash_bench: second verify re-hashed" >&2; exit 2; }

printf '\n%-44s %12s %12s\n' "measurement" "seconds" "MiB/s"
printf '%-44s %12s %12s\n' "sha256sum, 1 thread ($FILES files)" "$SUM_S" "$SUM_RATE"
printf '%-44s %12s %12s\n' "target = $CORES cores x sha256sum" "-" "$TARGET_RATE"
printf '%-44s %12s %12s\n' "openssl speed sha256, 1 thread (reference)" "-" "$OPENSSL_RATE"
printf '%-44s %12s %12s\n' "sparkctl weights verify, cold cache" "$FIRST_S" "$OURS_RATE"
printf '%-44s %12s %12s\n' "sparkctl weights verify, warm cache" "$SECOND_S" "-"
printf '\nours / target = %s%% (goal >= 90%%); warm / cold = %s%% (goal < 1%%)\n' "$PCT_TARGET" "$PCT_SECOND"
printf 'CPU sha_ni: %s; sha256sum linked to libcrypto: %s\n' "$SHANI" "$SUM_LIBCRYPTO"

cat > "$OUT" <<JSON
{
  "schema": "sparkctl-weights-hash-bench/v1",
  "host": "$(hostname -s)",
  "cpu": "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)",
  "cores": $CORES,
  "cpu_sha_ni": "$SHANI",
  "sha256sum_uses_libcrypto": "$SUM_LIBCRYPTO",
  "data_dir": "$DIR",
  "files": $FILES,
  "file_mib": $SIZE_MIB,
  "bytes": $BYTES,
  "sha256sum_single_thread_s": $SUM_S,
  "sha256sum_single_thread_mib_s": $SUM_RATE,
  "target_mib_s": $TARGET_RATE,
  "openssl_speed_single_thread_mib_s": $OPENSSL_RATE,
  "verify_cold_s": $FIRST_S,
  "verify_cold_mib_s": $OURS_RATE,
  "verify_warm_s": $SECOND_S,
  "cold_percent_of_target": $PCT_TARGET,
  "warm_percent_of_cold": $PCT_SECOND
}
JSON
echo "wrote $OUT" >&2
