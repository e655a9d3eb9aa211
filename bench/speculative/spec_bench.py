#!/usr/bin/env python3
"""Speculative decoding (ngram / prompt lookup) against plain decode on the CPU demo model.

Runs `spark-engine generate` on two prompts, greedy (temperature 0) and sampled (temperature 1,
seed 1), each without and with `--speculative-method ngram`, alternating within each round so
both see the same machine state:

  repetitive      a code-editing request: the prompt holds a block of code and asks for it back
                  with one change, so the expected output repeats the prompt
  non-repetitive  a prompt of prose whose continuation has nothing to copy

The demo model (scripts/make_demo_model.py) has random weights: its greedy text is whatever the
weights make of the prompt, so the acceptance measured here is the mechanism's on this model,
not a real model's. Every greedy speculative run's ids are checked equal to the plain run's
(greedy is lossless); a difference stops the benchmark. Sampled runs draw other tokens with and
without drafts (same distribution, another path through the RNG), so they are not compared.

    python3 bench/speculative/spec_bench.py [--engine build/bin/spark-engine] [--model DIR]
        [--k 4] [--tokens 256] [--rounds 3] [--threads 2]
        [--json bench/results/speculative_cpu_demo.json]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

CODE = """def moving_average(values, window):
    if window <= 0:
        raise ValueError("window must be positive")
    out = []
    total = 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        if i >= window - 1:
            out.append(total / window)
    return out
"""
PROMPTS = {
    "repetitive": "Rename the function moving_average to rolling_mean and return the whole file "
                  "unchanged otherwise:\n\n" + CODE + "\n" + CODE,
    "non-repetitive": "Write a short story about a lighthouse keeper who finds a map in a bottle "
                      "and decides to sail north before the winter storms arrive.",
}


def run(engine, model, prompt, tokens, threads, k, lookup_max, temperature):
    cmd = [engine, "generate", "--model", model, "--prompt", prompt, "--max-tokens", str(tokens),
           "--temperature", str(temperature), "--seed", "1", "--ignore-eos", "--print-ids",
           "--print-stats"]
    if threads:
        cmd += ["--threads", str(threads)]
    if k:
        cmd += ["--speculative-method", "ngram", "--num-speculative-tokens", str(k),
                "--prompt-lookup-max", str(lookup_max)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()
    ids = json.loads(out[-2])
    stats = json.loads(out[-1])
    if len(ids) != tokens:
        sys.exit(f"generated {len(ids)} tokens, not {tokens}: {' '.join(cmd)}")
    return ids, stats


def measure(a, model, name, prompt, temperature):
    """Plain and ngram runs of one prompt, alternating; greedy ids must agree."""
    rates = {0: [], a.k: []}
    steps = {}
    spec_stats = None
    for _ in range(a.rounds):
        plain_ids, plain = run(a.engine, model, prompt, a.tokens, a.threads, 0, a.lookup_max,
                               temperature)
        spec_ids, spec = run(a.engine, model, prompt, a.tokens, a.threads, a.k, a.lookup_max,
                             temperature)
        if temperature == 0 and spec_ids != plain_ids:
            sys.exit(f"{name}: speculative greedy ids differ from plain greedy ids")
        rates[0].append(a.tokens / plain["seconds"])
        rates[a.k].append(a.tokens / spec["seconds"])
        steps = {0: plain["num_steps"], a.k: spec["num_steps"]}
        spec_stats = spec
    drafted = spec_stats["spec_decode_num_draft_tokens"]
    row = {
        "prompt": name,
        "temperature": temperature,
        "tokens": a.tokens,
        "k": a.k,
        "plain_tok_s": statistics.median(rates[0]),
        "spec_tok_s": statistics.median(rates[a.k]),
        "plain_steps": steps[0],
        "spec_steps": steps[a.k],
        "drafts": spec_stats["spec_decode_num_drafts"],
        "draft_tokens": drafted,
        "accepted_tokens": spec_stats["spec_decode_num_accepted_tokens"],
        "acceptance": (spec_stats["spec_decode_num_accepted_tokens"] / drafted) if drafted else 0.0,
        "mean_accepted_length": spec_stats["spec_decode_mean_accepted_length"],
        "plain_tok_s_min_max": [min(rates[0]), max(rates[0])],
        "spec_tok_s_min_max": [min(rates[a.k]), max(rates[a.k])],
        "plain_tok_s_rounds": rates[0],
        "spec_tok_s_rounds": rates[a.k],
    }
    row["speedup"] = row["spec_tok_s"] / row["plain_tok_s"]
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", default="build/bin/spark-engine")
    ap.add_argument("--model")
    ap.add_argument("--tokenizer", default="../shared/data/tokenizers/qwen3")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--lookup-max", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default="bench/results/speculative_cpu_demo.json")
    a = ap.parse_args()
    model = a.model
    if not model:
        model = os.path.join(tempfile.mkdtemp(), "demo")
        subprocess.run([sys.executable, "scripts/make_demo_model.py", model, "--tokenizer",
                        a.tokenizer, "--dtype", "f32"], check=True, stdout=subprocess.DEVNULL)
    rows = []
    for name, prompt in PROMPTS.items():
        for temperature in (0.0, 1.0):
            rows.append(measure(a, model, name, prompt, temperature))
    hdr = (f"{'prompt':<15} {'temp':>4} {'k':>2} {'plain tok/s':>11} {'ngram tok/s':>11} {'speedup':>7} "
           f"{'steps':>11} {'accept':>7} {'mean len':>8} {'drafts':>6}")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(f"{r['prompt']:<15} {r['temperature']:>4.1f} {r['k']:>2} {r['plain_tok_s']:>11.1f} {r['spec_tok_s']:>11.1f} "
              f"{r['speedup']:>6.2f}x {r['plain_steps']:>5}/{r['spec_steps']:<5} "
              f"{100 * r['acceptance']:>6.1f}% {r['mean_accepted_length']:>8.2f} {r['drafts']:>6}")
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    result = {"schema": "spark-bench-speculative/v1", "machine": platform.machine(), "cpu": cpu,
              "cpus": os.cpu_count(), "threads": a.threads, "rounds": a.rounds,
              "model": "scripts/make_demo_model.py demo shape, f32" if not a.model else a.model,
              "rows": rows}
    if a.json:
        os.makedirs(os.path.dirname(a.json) or ".", exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
