#!/usr/bin/env python3
"""Merges plan_vs_engine.sh's parts into a table and a JSON file: the plan's device items
(weights, KV cache, activations, graph arena, CUDA runtime) against the device memory nvidia-smi
lists for the serving process after start-up and at its peak under load, and the engine process
item against its resident host memory. Standard library only.

    plan_vs_engine.py PARTS_DIR OUT.json
"""
import json
import os
import subprocess
import sys

MIB = 1 << 20


def read(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def main():
    parts, out = sys.argv[1], sys.argv[2]
    plan = json.loads(read(os.path.join(parts, "plan.json"), "{}") or "{}")
    if "rank" not in plan:
        print("plan_vs_engine.py: no plan (spark-engine plan failed?)", file=sys.stderr)
        return 2
    items = {i["name"]: i["bytes"] for i in plan["rank"]["items"]}
    kv = plan["rank"]["kv"]["bytes"]
    base = items.get("weights", 0) + kv + items.get("cuda graph arena", 0) + items.get("cuda runtime", 0)
    planned_start = base
    planned_peak = base + items.get("activations", 0)
    start_mib = read(os.path.join(parts, "gpu_start.txt"))
    peak_mib = read(os.path.join(parts, "gpu_peak.txt"))
    measured_start = int(start_mib) * MIB if start_mib else None
    measured_peak = int(peak_mib) * MIB if peak_mib else None
    status = json.loads(read(os.path.join(parts, "status_peak.json"), "{}") or "{}")
    host = status.get("memory", {}).get("peak_resident_bytes")
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    load = json.loads(read(os.path.join(parts, "load.json"), "{}") or "{}")

    def row(name, measured, planned):
        ratio = measured / planned if measured and planned else None
        return {"figure": name, "measured_bytes": measured, "planned_bytes": planned,
                "ratio": round(ratio, 4) if ratio else None,
                "within_5_percent": abs(ratio - 1) <= 0.05 if ratio else None}

    rows = [row("device memory after start-up", measured_start, planned_start),
            row("device memory at full KV use (peak)", measured_peak, planned_peak),
            row("host resident memory (peak)", host, items.get("engine process"))]
    doc = {"schema": "bench-memory-plan/v1", "gpu": gpu, "settings": plan.get("settings"),
           "plan_items": items, "kv_bytes": kv, "load": load, "rows": rows}
    with open(out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(f"{'figure':<40} {'measured MiB':>13} {'planned MiB':>12} {'ratio':>7}")
    for r in rows:
        m = f"{r['measured_bytes'] / MIB:.0f}" if r["measured_bytes"] else "-"
        p = f"{r['planned_bytes'] / MIB:.0f}" if r["planned_bytes"] else "-"
        q = f"{r['ratio']:.3f}" if r["ratio"] else "-"
        print(f"{r['figure']:<40} {m:>13} {p:>12} {q:>7}")
    print(f"(written to {out}; the host row is informative: the plan's engine process item is a "
          f"deliberate allowance)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
