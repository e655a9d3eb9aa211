#!/usr/bin/env python3
"""The reference perplexity a profile records (`quality: {text, perplexity, tolerance}`), computed
with Hugging Face transformers, for `sparkctl check --quality` (docs/evaluation.md).

Windows as the engine cuts them (`spark-engine perplexity`, sparkctl/serving/quality.h): the
text's tokens (tokenizer.json, no special tokens) in consecutive windows of --context tokens,
every token but each window's first scored; perplexity = exp(-sum log p / scored tokens). The
model runs in float32 (bf16 checkpoints are widened, as the CPU engine does).

Run by hand when the profile's model or text changes (CI never runs it):
  python3 -m venv /tmp/ref-venv && /tmp/ref-venv/bin/pip install torch transformers safetensors tokenizers
  python3 scripts/make_demo_model.py /tmp/demo-model
  /tmp/ref-venv/bin/python scripts/quality_reference.py --model /tmp/demo-model \\
      --text profiles/quality/demo.txt --context 512
"""
import argparse
import json
import math

import tokenizers
import torch
import transformers


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="checkpoint directory (with tokenizer.json)")
    ap.add_argument("--text", required=True)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--tokenizer", help="directory of tokenizer.json (default: --model)")
    a = ap.parse_args()
    tok = tokenizers.Tokenizer.from_file(f"{a.tokenizer or a.model}/tokenizer.json")
    ids = tok.encode(open(a.text, encoding="utf-8").read(), add_special_tokens=False).ids
    model = transformers.AutoModelForCausalLM.from_pretrained(
        a.model, dtype=torch.float32, attn_implementation="eager").eval()
    nll, scored = 0.0, 0
    for begin in range(0, len(ids), a.context):
        window = ids[begin:begin + a.context]
        if len(window) < 2:
            break
        with torch.no_grad():
            logits = model(torch.tensor([window])).logits[0].double()
        logprobs = torch.log_softmax(logits, dim=-1)
        for i in range(len(window) - 1):
            nll -= logprobs[i, window[i + 1]].item()
        scored += len(window) - 1
    mean = nll / scored
    print(json.dumps({"tokens": len(ids), "scored_tokens": scored, "context": a.context,
                      "mean_nll": mean, "perplexity": math.exp(mean),
                      "transformers_version": transformers.__version__,
                      "torch_version": torch.__version__}, indent=2))


if __name__ == "__main__":
    main()
