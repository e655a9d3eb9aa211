#!/usr/bin/env python3
"""Fills a running server's KV cache: STREAMS concurrent /v1/completions requests of distinct
random token-id prompts (half of LEN) generating the other half (ignore_eos), until TOKENS
tokens have gone through. With the prefix cache on, finished requests' full blocks stay cached at
the back of the free list, so fresh blocks are taken first and every block gets written.
Prints one JSON object (requests, tokens, seconds, failures). Standard library only.

    fill_kv.py --url http://127.0.0.1:18441 --model bench --streams 32 --tokens 262144 --len 4096
"""
import argparse
import json
import random
import sys
import threading
import time
import urllib.request


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--streams", type=int, default=32)
    ap.add_argument("--tokens", type=int, required=True)
    ap.add_argument("--len", type=int, default=4096)
    ap.add_argument("--vocab", type=int, default=150000)
    a = ap.parse_args()
    prompt_len, gen = a.len // 2, a.len // 2 - 8
    state = {"next": 0, "tokens": 0, "failed": 0, "requests": 0}
    lock = threading.Lock()

    def client():
        while True:
            with lock:
                if state["tokens"] >= a.tokens:
                    return
                i = state["next"]
                state["next"] += 1
                state["tokens"] += prompt_len + gen
            rng = random.Random(i)
            body = json.dumps({"model": a.model,
                               "prompt": [rng.randrange(a.vocab) for _ in range(prompt_len)],
                               "max_tokens": gen, "temperature": 0, "ignore_eos": True}).encode()
            req = urllib.request.Request(a.url + "/v1/completions", body,
                                         {"content-type": "application/json"})
            try:
                urllib.request.urlopen(req, timeout=3600).read()
                ok = True
            except Exception as e:  # noqa: BLE001 - counted and reported
                print(f"request {i}: {e}", file=sys.stderr)
                ok = False
            with lock:
                state["requests"] += 1
                state["failed"] += 0 if ok else 1

    start = time.time()
    threads = [threading.Thread(target=client) for _ in range(a.streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"requests": state["requests"], "tokens": state["tokens"],
                      "failed": state["failed"], "seconds": round(time.time() - start, 1)}))
    return 0 if state["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
