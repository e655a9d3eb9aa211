#!/usr/bin/env python3
"""The one-shot transport's latency model: measured socket-wire costs from oneshot_model.sh's
output folder, the field's RDMA wire figures, and a PROJECTED 4-Spark ring latency over RDMA at
4 KiB, 10 KiB and 64 KiB next to NCCL's published figures. Prints a table, writes JSON.

Usage: oneshot_model.py OUT_DIR RESULT_JSON   (oneshot_model.sh calls it)
"""
import glob
import json
import math
import os
import statistics
import sys

# Field figures (../shared/docs/FIELD_NOTES.md), not measured here.
FIELD = {
    "wire_one_way_us": 1.5,          # ib_write_lat, one way
    "twin_gbps": 110.0,              # ib_write_bw, one twin (PCIe function)
    "both_twins_gbps": 190.0,        # both twins of a port
    "extra_ring_hop_us": 1.8,        # "one extra ring hop adds ~1.8 us"
    "oneshot_pair_10k_us": 10.9,     # one-shot RDMA, pair, 10 KiB
    "oneshot_ring4_us": {"10240": 16.9, "61440": 28.0},
    "nccl_ring4_us": {"8192": 47.0, "10240": 91.0, "61440": 111.0},
    "gb10_memory_gbps": 273.0,       # LPDDR5x: the reduce reads the slots from it
}
SIZES = [4096, 10240, 65536]
STRIPE = 64 << 10  # the RDMA wire splits slices over both twins from here (verbs_wire.h)


def hops(ranks):
    return max(1, math.ceil((ranks - 1) / 2))


def wire_us(size):
    gbps = FIELD["both_twins_gbps"] if size >= STRIPE else FIELD["twin_gbps"]
    return size * 8 / (gbps * 1e3)


def model_us(ranks, size, s_call, s_relay):
    h = hops(ranks)
    reduce_us = size * ranks / (FIELD["gb10_memory_gbps"] * 1e3)
    return s_call + h * (FIELD["wire_one_way_us"] + wire_us(size)) + (h - 1) * s_relay + reduce_us


def calibrate():
    """Software costs of the RDMA path, from the field's own one-shot figures."""
    s_relay = FIELD["extra_ring_hop_us"] - FIELD["wire_one_way_us"]
    pair = FIELD["oneshot_pair_10k_us"]
    s_call = pair - (FIELD["wire_one_way_us"] + wire_us(10240) + 10240 * 2 / (FIELD["gb10_memory_gbps"] * 1e3))
    return s_call, s_relay


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def sim_times(out, tag, transport):
    """Median over repeats of the out-of-place time per size, or {} when not measured."""
    per_size = {}
    for path in sorted(glob.glob(os.path.join(out, f"sim{tag}_{transport}_*.json"))):
        j = load(path)
        if not j:
            continue
        for row in j.get("results", []):
            per_size.setdefault(row["size"], []).append(row["out_of_place"]["time"])
    return {s: statistics.median(v) for s, v in per_size.items()}


def loop_p50(out, name):
    j = load(os.path.join(out, name))
    return {r["bytes"]: r["p50_us"] for r in j["rows"]} if j else {}


def link_one_way_us(out):
    j = load(os.path.join(out, "sim2_link.json"))
    if not j:
        return None
    p50 = [l["result"]["latency_us"]["p50"] for l in j["links"] if l.get("ok")]
    return statistics.median(p50) if p50 else None


def fmt(v):
    return "n/m" if v is None else f"{v:.1f}"


def main():
    out, result = sys.argv[1], sys.argv[2]
    s_call, s_relay = calibrate()
    loop2, loop4 = loop_p50(out, "loop_pair.json"), loop_p50(out, "loop_ring4.json")
    loop4m = loop_p50(out, "loop_mesh4.json")
    sim = {t: sim_times(out, t, "oneshot") for t in ("2", "4s", "4", "8")}
    gloo4 = sim_times(out, "4", "gloo")
    link = link_one_way_us(out)
    rows = []
    print("# PROJECTION (not a measurement): one-shot all-reduce on a 4-Spark ring over RDMA")
    print(f"# software costs from the field's one-shot figures: per call {s_call:.2f} us, "
          f"per relay {s_relay:.2f} us; wire {FIELD['wire_one_way_us']} us one way, "
          f"{FIELD['twin_gbps']:.0f}/{FIELD['both_twins_gbps']:.0f} Gb/s")
    print("# measured here (socket wire): loopback threads p50; simulator medians of the "
          "out-of-place averages; link one-way p50 " + fmt(link) + " us")
    head = ("size", "proj 4-ring", "field oneshot", "NCCL field", "loop pair", "loop mesh4",
            "loop ring4", "sim pair", "sim sw4", "sim ring4", "sim ring8", "sim gloo4")
    print("%8s %12s %13s %10s %10s %10s %10s %9s %9s %9s %9s %9s" % head)
    for size in SIZES:
        proj = model_us(4, size, s_call, s_relay)
        field_os = FIELD["oneshot_ring4_us"].get(str(size)) or (
            FIELD["oneshot_ring4_us"]["61440"] if size == 65536 else None)
        nccl = {4096: FIELD["nccl_ring4_us"]["8192"], 10240: FIELD["nccl_ring4_us"]["10240"],
                65536: FIELD["nccl_ring4_us"]["61440"]}[size]
        row = {"bytes": size, "projected_ring4_us": round(proj, 2),
               "field_oneshot_ring4_us": field_os, "field_nccl_ring4_us": nccl,
               "loopback_pair_p50_us": loop2.get(size), "loopback_mesh4_p50_us": loop4m.get(size),
               "loopback_ring4_p50_us": loop4.get(size), "sim_pair_us": sim["2"].get(size),
               "sim_switched4_us": sim["4s"].get(size), "sim_ring4_us": sim["4"].get(size),
               "sim_ring8_us": sim["8"].get(size), "sim_gloo_ring4_us": gloo4.get(size)}
        rows.append(row)
        print("%8d %12.1f %13s %10.0f %10s %10s %10s %9s %9s %9s %9s %9s" % (
            size, proj, fmt(field_os), nccl, fmt(loop2.get(size)), fmt(loop4m.get(size)),
            fmt(loop4.get(size)), fmt(sim["2"].get(size)), fmt(sim["4s"].get(size)),
            fmt(sim["4"].get(size)), fmt(sim["8"].get(size)), fmt(gloo4.get(size))))
    derived = {}
    if sim["4s"] and sim["4"]:  # the same four ranks, one hop against two (relayed)
        derived["sim_relay_hop_us"] = {s: round(sim["4"][s] - sim["4s"][s], 1)
                                       for s in sim["4s"] if s in sim["4"]}
    if loop4m and loop4:
        derived["loopback_relay_hop_us"] = {s: round(loop4[s] - loop4m[s], 1)
                                            for s in loop4m if s in loop4}
    if sim["2"] and link:
        derived["sim_call_software_us"] = {s: round(t - link, 1) for s, t in sim["2"].items()}
    print("# derived from the simulator (socket wire):", json.dumps(derived))
    os.makedirs(os.path.dirname(result), exist_ok=True)
    with open(result, "w") as f:
        json.dump({"schema": "sparkctl-oneshot-model/v1", "projection": True,
                   "field_constants": FIELD,
                   "calibrated": {"call_software_us": round(s_call, 2),
                                  "relay_software_us": round(s_relay, 2)},
                   "sim_link_one_way_us": link, "rows": rows, "derived": derived}, f, indent=2)
        f.write("\n")
    print(f"# wrote {result}")


if __name__ == "__main__":
    main()
