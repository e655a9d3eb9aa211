#!/usr/bin/env python3
"""Merges the parts of bench/engine/serve_cuda.sh into one results file.

    serve_cuda_merge.py PARTS_DIR MODEL_DIR OUT.json

Every figure is from this run's parts; one the run did not produce is written as null with the
reason under "not_measured". Engine figures are spark-decode-bench's steps launched ahead of the
host (its headline), served ones serve_load.py's.
"""
import datetime
import json
import os
import re
import sys

GOALS = {"served_c1_vs_engine_b1": 0.97, "served_c32_decode_vs_engine_b32": 0.92,
         "load_vs_sequential_read": 0.8, "load_gbps_page_cache": 2.0}


def load_seconds(log_path):
    """The seconds of rank 0's "loaded (... weights) in X s" line in a serve log, or None."""
    if not os.path.exists(log_path):
        return None
    m = re.search(r"rank 0/\d+: .* loaded \([a-z0-9]+ weights\) in ([0-9.]+) s", open(log_path).read())
    return float(m.group(1)) if m else None


def engine_row(decode, batch):
    row = next(d for d in decode["decode"] if d["tp"] == 1 and d["batch"] == batch)
    return row.get("ahead_tok_s") or row["tok_s"]


def main():
    parts, model, out = sys.argv[1:4]
    j = json.load
    decode = j(open(f"{parts}/decode.json"))
    loads = {c: j(open(f"{parts}/load_c{c}.json")) for c in (1, 8, 32)}
    cold, warm = j(open(f"{parts}/read_cold.json")), j(open(f"{parts}/read_warm.json"))
    model_bytes = sum(os.path.getsize(os.path.join(model, f)) for f in os.listdir(model)
                      if f.endswith(".safetensors"))
    b1, b32 = engine_row(decode, 1), engine_row(decode, 32)
    t_warm, t_cold = load_seconds(f"{parts}/serve.log"), load_seconds(f"{parts}/serve_cold.log")
    not_measured = {}
    gbps_warm = model_bytes / t_warm / 1e9 if t_warm else None
    gbps_cold = model_bytes / t_cold / 1e9 if t_cold else None
    if t_warm is None:
        not_measured["load_gbps_page_cache"] = "no load time in serve.log"
    if t_cold is None:
        not_measured["load_gbps_cold"] = "no load time in serve_cold.log"
    if not loads[32]["decode_window_tok_s"]:
        not_measured["served_c32_decode_vs_engine_b32"] = (
            "no window with all 32 streams decoding (a stream ended before the last began)")
    res = {
        "gpu": decode.get("gpu"),
        "date": datetime.date.today().isoformat(),
        "served_c1_vs_engine_b1": loads[1]["per_stream_tok_s_mean"] / b1,
        "served_c32_decode_vs_engine_b32": (loads[32]["decode_window_tok_s"] / b32
                                            if loads[32]["decode_window_tok_s"] else None),
        "load_gbps_page_cache": gbps_warm,
        "load_vs_sequential_read": gbps_warm / warm["gbps"] if gbps_warm else None,
        "load_gbps_cold": gbps_cold,
        "load_cold_vs_sequential_read": gbps_cold / cold["gbps"] if gbps_cold else None,
        "goals": GOALS,
        "not_measured": not_measured,
        "raw": {
            "engine_b1_tok_s": b1,
            "engine_b32_tok_s": b32,
            "served": loads,
            "checkpoint_bytes": model_bytes,
            "load_seconds_page_cache": t_warm,
            "load_seconds_cold": t_cold,
            "sequential_read_page_cache": warm,
            "sequential_read_cold": cold,
        },
    }
    with open(out, "w") as f:
        json.dump(res, f, indent=2)
        f.write("\n")
    print(f"{'what':38} {'value':>10} {'goal':>6}")
    for k in ("served_c1_vs_engine_b1", "served_c32_decode_vs_engine_b32", "load_gbps_page_cache",
              "load_vs_sequential_read", "load_gbps_cold", "load_cold_vs_sequential_read"):
        v = res[k]
        print(f"{k:38} {('%.3f' % v) if v is not None else 'n/m':>10} {GOALS.get(k, ''):>6}")
    print(f"engine b1/b32 {b1:.1f}/{b32:.0f} tok/s; served c1/c8/c32 aggregate "
          + "/".join(f"{loads[c]['aggregate_tok_s']:.0f}" for c in (1, 8, 32))
          + f" tok/s; wrote {out}")


if __name__ == "__main__":
    main()
