#!/usr/bin/env python3
"""`spark-engine serve --backend cuda` with CUDA graphs (the default), streamed over HTTP (SSE, the
standard library: GPU machines may have no packages), on the dense and the MoE tiny checkpoints.

For each model: a greedy stream decodes while a second request's prompt, longer than the step's
token budget (--max-batched-tokens), is prefilled in chunks beside it; both greedy outputs must
equal `spark-engine generate --backend cuda` (eager steps). A sampled request (temperature, top-p,
seed) must give the same text from the graph server as from a `--no-cuda-graphs` one. /metrics
must count graph steps for the dense model (graphs ran) and, for MoE, eager steps with their
reason (graphs cannot take MoE). Exits 77 (skipped) without a GPU.
"""
import argparse
import http.client
import json
import re
import signal
import subprocess
import sys
import threading
import urllib.request

SHORT = [5, 17, 42, 7, 99]
LONG = [(i * 37 + 11) % 250 + 3 for i in range(100)]  # 100 ids (both vocabularies), > 32
TOKENS = 24


def has_gpu():
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    except OSError:
        return False


def generate(engine, model, prompt):
    out = subprocess.run([engine, "generate", "--model", model, "--backend", "cuda",
                          "--prompt-ids", ",".join(map(str, prompt)), "--max-tokens", str(TOKENS),
                          "--temperature", "0", "--ignore-eos", "--print-ids", "--no-cuda-graphs"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"generate failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout)


class Server:
    def __init__(self, engine, model, tokenizer, *extra):
        self.proc = subprocess.Popen(
            [engine, "serve", "--model", model, "--tokenizer", tokenizer, "--port", "0",
             "--backend", "cuda", "--served-model-name", "m", "--max-batched-tokens", "32", *extra],
            stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"serve {' '.join(extra)} exited {self.proc.wait()} before serving")
        self.port = int(line.rsplit(":", 1)[1])

    def complete(self, body):
        """The completion's text, streamed (SSE chunks joined)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        conn.request("POST", "/v1/completions", body=json.dumps({"model": "m", "stream": True, **body}),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:500]!r}")
        text = []
        for raw in resp:
            line = raw.strip()
            if line.startswith(b"data:") and line[5:].strip() != b"[DONE]":
                chunk = json.loads(line[5:])
                if chunk.get("choices"):
                    text.append(chunk["choices"][0].get("text", ""))
        return "".join(text)

    def ids(self, prompt, out):
        """Greedy: the text, appended to `out`."""
        out.append(self.complete({"prompt": prompt, "max_tokens": TOKENS, "temperature": 0,
                                  "ignore_eos": True}))

    def sampled(self):
        return self.complete({"prompt": SHORT, "max_tokens": TOKENS, "temperature": 0.8,
                              "top_p": 0.9, "seed": 1234, "ignore_eos": True})

    def metrics(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=60) as r:
            return r.read().decode()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)


def detokenize(engine, tokenizer, ids):
    return subprocess.run([engine, "detokenize", "--tokenizer", tokenizer], input=json.dumps(ids),
                          capture_output=True, text=True, check=True).stdout.rstrip("\n")


def steps(metrics, mode):
    return sum(float(v) for v in re.findall(
        r'^spark:decode_steps_total\{[^}]*mode="' + mode + r'"[^}]*\} ([0-9.e+]+)$', metrics, re.M))


def check_model(a, model, moe, failures):
    name = "moe" if moe else "dense"
    want = [detokenize(a.engine, a.tokenizer, generate(a.engine, model, p)) for p in (SHORT, LONG)]
    graphs = Server(a.engine, model, a.tokenizer)
    try:
        got_short, got_long = [], []
        t = threading.Thread(target=graphs.ids, args=(SHORT, got_short))
        t.start()
        graphs.ids(LONG, got_long)  # chunked over 4 steps while the short one decodes
        t.join()
        if [got_short[0], got_long[0]] != want:
            failures.append(f"{name}: served greedy {[got_short[0], got_long[0]]!r} != generate "
                            f"{want!r}")
        sampled = graphs.sampled()
        m = graphs.metrics()
        if not moe and steps(m, "graph") == 0:
            failures.append(f"{name}: no graph decode steps in /metrics")
        if moe and not re.search(r'mode="eager",reason="[^"]+"', m):
            failures.append(f"{name}: no eager step with its reason in /metrics")
    finally:
        if graphs.stop() != 0:
            failures.append(f"{name}: serve exited non-zero after SIGTERM")
    eager = Server(a.engine, model, a.tokenizer, "--no-cuda-graphs")
    try:
        if eager.sampled() != sampled:
            failures.append(f"{name}: sampled text differs between graph and eager servers")
    finally:
        eager.stop()
    print(f"{name}: greedy {want!r}, sampled {sampled!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", required=True)
    ap.add_argument("--dense", required=True)
    ap.add_argument("--moe", required=True)
    ap.add_argument("--tokenizer", required=True)
    a = ap.parse_args()
    if not has_gpu():
        print("SKIPPED: no CUDA device (nvidia-smi -L failed)")
        return 77
    failures = []
    check_model(a, a.dense, False, failures)
    check_model(a, a.moe, True, failures)
    print("\n".join("FAIL " + f for f in failures) or "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
