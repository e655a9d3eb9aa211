#!/usr/bin/env python3
"""Single-thread Hugging Face `tokenizers` encoding throughput (MB/s) on a JSON list of
documents; prints one number. Used by encode_bench; usage: hf_encode_bench.py TOKENIZER_JSON DOCS_JSON"""
import json
import os
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
import tokenizers  # noqa: E402

tok = tokenizers.Tokenizer.from_file(sys.argv[1])
with open(sys.argv[2], encoding="utf-8") as f:
    docs = json.load(f)
size = sum(len(d.encode("utf-8")) for d in docs)
best = 0.0
for _ in range(3):
    start = time.thread_time()  # CPU time of this thread: one core, even on a busy machine
    for d in docs:
        tok.encode(d, add_special_tokens=False)
    best = max(best, size / 1e6 / (time.thread_time() - start))
print(f"{best:.3f}")
