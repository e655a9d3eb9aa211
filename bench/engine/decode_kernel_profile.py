#!/usr/bin/env python3
"""Sums ncu's gpu__time_duration per kernel (name and grid) from a --csv run of
decode_kernel_profile.sh, per decode step (steps counted by the embedding kernel, one per step).
Usage: decode_kernel_profile.py NCU.csv"""
import collections
import csv
import re
import signal
import sys


def short_name(name):
    name = re.sub(r"\(.*", "", name)  # parameters
    name = re.sub(r"^void ", "", name)
    for prefix in ("spark::kernels::", "spark::", "(anonymous namespace)::", "<unnamed>::",
                   "unnamed>::", "detail::"):
        name = name.replace(prefix, "")
    return name[:60]


def main(path):
    header, totals, count = None, collections.OrderedDict(), 0
    for row in csv.reader(open(path, newline="")):
        if "Kernel Name" in row and "Metric Value" in row:
            header = row
            continue
        if header is None or len(row) != len(header):
            continue
        d = dict(zip(header, row))
        if d.get("Metric Name") != "gpu__time_duration.sum":
            continue
        key = (short_name(d["Kernel Name"]), d.get("Grid Size", ""))
        entry = totals.setdefault(key, [0, 0.0])
        entry[0] += 1
        entry[1] += float(d["Metric Value"].replace(",", "")) / 1e3  # ns -> us
        count += 1
    if not totals:
        sys.exit(f"{path}: no gpu__time_duration rows (did ncu profile any kernel?)")
    steps = sum(n for (name, _), (n, _) in totals.items() if name.startswith("EmbeddingKernel"))
    steps = max(steps, 1)
    total = sum(t for _, t in totals.values())
    print(f"{count} kernels over {steps} decode step(s): {total / steps:.1f} us of kernel time "
          f"per step")
    print(f"{'per step us':>12} {'calls':>6} {'us/call':>8}  kernel (grid)")
    for (name, grid), (n, t) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        print(f"{t / steps:12.1f} {n / steps:6.1f} {t / n:8.2f}  {name} {grid}")


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
