#!/usr/bin/env python3
"""`spark-engine serve` on the tiny Qwen3 checkpoint, through the official `openai` client.

Greedy output must equal `spark-engine generate` (same ids, decoded by the same tokenizer);
/ready must pass its canary; SIGTERM must exit 0. The tiny model's vocabulary (301) is far
smaller than the Qwen3 tokenizer's, so prompts are token ids. Exits 77 (skipped) without the
`openai` package.
"""
import argparse
import json
import signal
import subprocess
import sys
import urllib.request

try:
    import openai
except ImportError:
    print("SKIPPED: the `openai` Python package is missing (python3 -m pip install openai)")
    sys.exit(77)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokenizer", required=True)
    a = ap.parse_args()
    prompt = [5, 17, 42]
    ids = json.loads(subprocess.run(
        [a.engine, "generate", "--model", a.model, "--prompt-ids", "5,17,42", "--max-tokens", "8",
         "--temperature", "0", "--print-ids"], capture_output=True, text=True, check=True).stdout)
    expected = subprocess.run([a.engine, "detokenize", "--tokenizer", a.tokenizer], input=json.dumps(ids),
                              capture_output=True, text=True, check=True).stdout.rstrip("\n")
    proc = subprocess.Popen([a.engine, "serve", "--model", a.model, "--tokenizer", a.tokenizer, "--port", "0",
                             "--served-model-name", "tiny", "--threads", "2"], stdout=subprocess.PIPE, text=True)
    failures = []
    try:
        line = proc.stdout.readline()
        port = int(line.rsplit(":", 1)[1])
        c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=60)
        r = c.completions.create(model="tiny", prompt=prompt, max_tokens=8, temperature=0)
        print("generate:", ids, repr(expected), " serve:", repr(r.choices[0].text), r.usage)
        if r.choices[0].text != expected or r.usage.completion_tokens != len(ids):
            failures.append("greedy output differs from spark-engine generate")
        text = "".join(ch.choices[0].text for ch in c.completions.create(
            model="tiny", prompt=prompt, max_tokens=8, temperature=0, stream=True))
        if text != expected:
            failures.append("streamed output differs")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=60) as resp:
            if resp.status != 200:
                failures.append("/ready not 200")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as resp:
            if b'vllm:kv_cache_usage_perc{model_name="tiny",engine="0"} 0.0\n' not in resp.read():
                failures.append("KV blocks still in use after the requests")
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(60)
    if rc != 0:
        failures.append(f"serve exited {rc} after SIGTERM")
    print("\n".join("FAIL " + f for f in failures) or "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
