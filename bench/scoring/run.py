#!/usr/bin/env python3
"""Prefill tok/s with and without prompt scoring, through `spark-engine serve`.

Starts `spark-engine serve` (prefix cache off, so every request prefills its whole prompt) on a
checkpoint (default: the random-weight demo model that scripts/make_demo_model.py writes, Qwen3's
151,936-token vocabulary) and sends token-id prompts of each length, alternating within each
round:
  plain:  max_tokens 1                                  (one logits row per prompt)
  scored: max_tokens 1, echo, logprobs 1                (a row per prompt token, log-softmax,
                                                         top-1 and the JSON of every position)
Prefill tok/s = prompt tokens / request latency (the one generated token included in both).
Prints a table (median of the rounds) and writes JSON (schema spark-bench-scoring/v1).

    python3 bench/scoring/run.py --engine build/bin/spark-engine --lengths 128,512,2048 \\
        --rounds 5 --threads 2 --out bench/results/scoring_cpu_demo.json
"""
import argparse
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        doc = json.loads(r.read())
    return time.perf_counter() - start, doc


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", default=os.path.join(ROOT, "build/bin/spark-engine"))
    ap.add_argument("--model", help="checkpoint (default: a fresh demo model)")
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "../shared/data/tokenizers/qwen3"))
    ap.add_argument("--lengths", default="128,512,2048")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--serve-args", default="",
                    help="more `spark-engine serve` flags, e.g. '--backend cuda'")
    ap.add_argument("--out", help="write the JSON here")
    a = ap.parse_args()
    model = a.model
    if model is None:
        model = os.path.join(tempfile.mkdtemp(), "demo")
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts/make_demo_model.py"), model,
                        "--tokenizer", a.tokenizer, "--dtype", "f32"], check=True,
                       stdout=subprocess.DEVNULL)
    lengths = [int(x) for x in a.lengths.split(",")]
    proc = subprocess.Popen([a.engine, "serve", "--model", model, "--port", "0",
                             "--served-model-name", "m", "--threads", str(a.threads),
                             "--no-prefix-caching", "--max-model-len", str(max(lengths) + 8),
                             *shlex.split(a.serve_args)],
                            stdout=subprocess.PIPE, text=True)
    rows = []
    try:
        port = int(proc.stdout.readline().rsplit(":", 1)[1])
        for n in lengths:
            ids = [(i * 7919 + 13) % 150000 + 10 for i in range(n)]
            plain = {"model": "m", "prompt": ids, "max_tokens": 1, "temperature": 0}
            scored = {**plain, "echo": True, "logprobs": 1}
            post(port, plain)  # warm-up
            post(port, scored)
            times = {"plain": [], "scored": []}
            for _ in range(a.rounds):
                for name, body in (("plain", plain), ("scored", scored)):
                    secs, doc = post(port, body)
                    if name == "scored":
                        assert len(doc["choices"][0]["logprobs"]["tokens"]) == n + 1, doc
                    times[name].append(secs)
            p, s = statistics.median(times["plain"]), statistics.median(times["scored"])
            rows.append({"prompt_tokens": n, "plain_seconds": times["plain"],
                         "scored_seconds": times["scored"], "plain_tok_s": n / p,
                         "scored_tok_s": n / s, "overhead": s / p})
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    print(f"{'prompt':>7} {'plain tok/s':>12} {'scored tok/s':>13} {'scored/plain time':>18}")
    for r in rows:
        print(f"{r['prompt_tokens']:>7} {r['plain_tok_s']:>12.1f} {r['scored_tok_s']:>13.1f} "
              f"{r['overhead']:>17.2f}x")
    doc = {"schema": "spark-bench-scoring/v1", "model": model, "threads": a.threads,
           "serve_args": a.serve_args,
           "rounds": a.rounds, "machine": platform.machine(), "cpus": os.cpu_count(),
           "loadavg": os.getloadavg(), "rows": rows}
    if a.out:
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
