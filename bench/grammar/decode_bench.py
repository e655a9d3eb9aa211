#!/usr/bin/env python3
"""Decode tok/s with and without structured output, through `spark-engine serve`.

Starts the server on a checkpoint (by default it makes the random-weight Qwen3 demo model, vocab
151,936, on the CPU backend), then for each concurrency runs rounds of streamed chat requests:
plain sampling, and the same with a JSON Schema that keeps the grammar busy for every token (an
array of at least 64 short strings), each request exactly --tokens long (min_tokens +
ignore_eos). Both runs sample at temperature 1 so that both return whole logit rows; the
difference is the grammar. Decode tok/s per stream = (completion tokens - 1) / (last token -
first token) from the client's clock; the table shows the median over streams.

    bench/grammar/decode_bench.py [--engine build/bin/spark-engine] [--model DIR]
        [--backend cpu|cuda] [--concurrency 1,8] [--tokens 128] [--rounds 3] [--json OUT]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

SCHEMA = {"type": "array", "minItems": 64,
          "items": {"type": "string", "maxLength": 8}}


def stream(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    start = time.monotonic()
    first = last = None
    usage = None
    with urllib.request.urlopen(req, timeout=1800) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                usage = chunk["usage"]
            for c in chunk.get("choices", []):
                d = c.get("delta", {})
                if d.get("content") or d.get("reasoning_content"):
                    now = time.monotonic()
                    first = first or now
                    last = now
    return {"ttft": first - start, "decode": last - first,
            "tokens": usage["completion_tokens"] if usage else 0}


def run_round(port, concurrency, tokens, schema, seed):
    out = [None] * concurrency

    def one(i):
        body = {"model": "bench", "max_tokens": tokens, "min_tokens": tokens, "ignore_eos": True,
                "temperature": 1.0, "seed": seed + i, "stream": True,
                "stream_options": {"include_usage": True},
                "chat_template_kwargs": {"enable_thinking": False},
                "messages": [{"role": "user", "content": f"stream {i}: list short words"}]}
        if schema:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "words", "schema": SCHEMA}}
        out[i] = stream(port, body)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", default="build/bin/spark-engine")
    ap.add_argument("--model")
    ap.add_argument("--tokenizer", default="../shared/data/tokenizers/qwen3")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--concurrency", default="1,8")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    model = a.model
    if not model:
        model = os.path.join(tmp, "demo")
        subprocess.run([sys.executable, "scripts/make_demo_model.py", model, "--tokenizer",
                        a.tokenizer, "--dtype", "f32"], check=True, stdout=subprocess.DEVNULL)
    cmd = [a.engine, "serve", "--model", model, "--port", "0", "--served-model-name", "bench",
           "--backend", a.backend]
    if a.threads:
        cmd += ["--threads", str(a.threads)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    rows = []
    try:
        port = int(proc.stdout.readline().rsplit(":", 1)[1])
        run_round(port, 1, 8, False, 1)  # warm-up
        for conc in [int(c) for c in a.concurrency.split(",")]:
            for schema in (False, True):
                rates, ttfts = [], []
                for r in range(a.rounds):
                    for s in run_round(port, conc, a.tokens, schema, 100 * r):
                        if s["tokens"] != a.tokens:
                            sys.exit(f"a stream generated {s['tokens']} tokens, not {a.tokens}")
                        rates.append((s["tokens"] - 1) / s["decode"])
                        ttfts.append(s["ttft"])
                rows.append({"concurrency": conc, "schema": schema,
                             "decode_tok_s_per_stream_median": statistics.median(rates),
                             "decode_tok_s_per_stream_min": min(rates),
                             "decode_tok_s_per_stream_max": max(rates),
                             "aggregate_tok_s": statistics.median(rates) * conc,
                             "ttft_s_median": statistics.median(ttfts),
                             "streams": len(rates)})
    finally:
        proc.terminate()
        proc.wait(60)
    print(f"{'conc':>4} {'schema':>6} {'tok/s/stream (median)':>22} {'min':>8} {'max':>8} "
          f"{'x conc':>8} {'TTFT s':>7}")
    for r in rows:
        print(f"{r['concurrency']:>4} {'yes' if r['schema'] else 'no':>6} "
              f"{r['decode_tok_s_per_stream_median']:>22.1f} {r['decode_tok_s_per_stream_min']:>8.1f} "
              f"{r['decode_tok_s_per_stream_max']:>8.1f} {r['aggregate_tok_s']:>8.1f} "
              f"{r['ttft_s_median']:>7.3f}")
    for conc in sorted({r["concurrency"] for r in rows}):
        plain = next(r for r in rows if r["concurrency"] == conc and not r["schema"])
        js = next(r for r in rows if r["concurrency"] == conc and r["schema"])
        ratio = js["decode_tok_s_per_stream_median"] / plain["decode_tok_s_per_stream_median"]
        print(f"concurrency {conc}: with a schema {100 * (ratio - 1):+.1f}% decode tok/s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"schema": "sparkctl-grammar-decode-bench/v1", "model": model,
                       "backend": a.backend, "tokens": a.tokens, "rounds": a.rounds,
                       "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
