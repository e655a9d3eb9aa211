#!/usr/bin/env python3
"""Streams C concurrent /v1/completions requests through a running server and times them.

Each client sends one request (a ~100-token text prompt, distinct per client, `max_tokens`
tokens with ignore_eos, stream with include_usage) and timestamps every SSE chunk. Prints one
JSON object: aggregate tok/s (all completion tokens over the wall time from the first request to
the last end), per-stream tok/s (a stream's tokens after its first over the time from its first
chunk to its last), the median time to first token, and the decode window: from the moment every
stream has its first token to the moment the first stream ends, the tokens received in it over
its length (every stream decoding at once, no prefill in it). A chunk can carry more than one
token (text held back inside a UTF-8 character), so a stream's chunks count as its tokens over
its chunks each. Standard library only.

    serve_load.py --url http://127.0.0.1:8000 --concurrency 32 [--max-tokens 256] [--model NAME]
"""
import argparse
import http.client
import json
import statistics
import sys
import threading
import time
import urllib.parse

WORDS = ("the quick brown fox jumps over a lazy dog while seven wise owls count "
         "stars above the quiet river and distant mountains glow in evening light").split()


def prompt(i, words=90):
    """About 100 Qwen3 tokens of plain English, different for each client."""
    out = [f"Request {i}:"]
    for k in range(words):
        out.append(WORDS[(k * 7 + i * 3) % len(WORDS)])
    return " ".join(out)


def stream_one(url, body, result):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=600)
    start = time.monotonic()
    conn.request("POST", "/v1/completions", body=json.dumps(body),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        result["error"] = f"HTTP {resp.status}: {resp.read()[:300]!r}"
        return
    stamps, usage = [], None
    for raw in resp:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        chunk = json.loads(data)
        if chunk.get("usage"):
            usage = chunk["usage"]
        if chunk.get("choices") and chunk["choices"][0].get("text"):
            stamps.append(time.monotonic())
    result.update(start=start, end=time.monotonic(), stamps=stamps,
                  tokens=(usage or {}).get("completion_tokens", len(stamps)))


def run(url, model, concurrency, max_tokens):
    results = [{} for _ in range(concurrency)]
    threads = []
    for i in range(concurrency):
        body = {"model": model, "prompt": prompt(i), "max_tokens": max_tokens, "temperature": 0,
                "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
        threads.append(threading.Thread(target=stream_one, args=(url, body, results[i])))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    errors = [r["error"] for r in results if "error" in r or not r.get("stamps")]
    if errors:
        sys.exit(f"serve_load: {len(errors)} of {concurrency} requests failed: {errors[0]}")
    t0 = min(r["start"] for r in results)
    t1 = max(r["end"] for r in results)
    tokens = sum(r["tokens"] for r in results)
    # A chunk carries the text of one or more tokens (the detokenizer holds back a token that
    # ends inside a UTF-8 character), so chunks are counted as tokens / chunks of their stream.
    per_stream = [(r["tokens"] - 1) / (r["stamps"][-1] - r["stamps"][0])
                  for r in results if len(r["stamps"]) > 1]
    window_start = max(r["stamps"][0] for r in results)
    window_end = min(r["stamps"][-1] for r in results)
    in_window = sum(r["tokens"] / len(r["stamps"]) *
                    sum(1 for s in r["stamps"] if window_start < s <= window_end)
                    for r in results)
    window = window_end - window_start
    return {
        "concurrency": concurrency,
        "max_tokens": max_tokens,
        "completion_tokens": tokens,
        "wall_s": t1 - t0,
        "aggregate_tok_s": tokens / (t1 - t0),
        "per_stream_tok_s_mean": statistics.mean(per_stream),
        "ttft_s_median": statistics.median(r["stamps"][0] - r["start"] for r in results),
        "decode_window_s": window,
        "decode_window_tok_s": in_window / window if window > 0 else None,
        "chunks_per_token": sum(len(r["stamps"]) for r in results) / tokens,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", default="model")
    ap.add_argument("--concurrency", type=int, required=True)
    ap.add_argument("--max-tokens", type=int, default=256)
    args = ap.parse_args()
    if args.concurrency < 1 or args.max_tokens < 2:
        sys.exit("serve_load: --concurrency >= 1 and --max-tokens >= 2")
    print(json.dumps(run(args.url, args.model, args.concurrency, args.max_tokens)))


if __name__ == "__main__":
    main()
