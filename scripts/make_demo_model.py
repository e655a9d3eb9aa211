#!/usr/bin/env python3
"""Writes a tiny random-weight Qwen3 checkpoint that speaks the real Qwen3 vocabulary.

The model (hidden 64, 2 layers, 4 query heads, 2 KV heads, head_dim 16, intermediate 128,
vocab_size 151936 as Qwen3 pads it) exercises the whole serving path with real text prompts
(tokenizer.json is copied next to it) in seconds on a CPU; its output is gibberish. The weights
are deterministic for a given --seed. Standard library only: values are built as bf16 bit
patterns from random bytes (random sign and mantissa, exponent in a narrow band), so no
per-element Python arithmetic is needed.

    python3 scripts/make_demo_model.py OUT_DIR [--tokenizer DIR] [--dtype bf16|f32] [--seed N]
    spark-engine generate --model OUT_DIR --prompt "Hello" --max-tokens 8 --temperature 0 --tp 4
"""
import argparse
import json
import os
import random
import shutil
import struct
import sys

HIDDEN = 64
LAYERS = 2
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 16
INTERMEDIATE = 128
VOCAB = 151936  # Qwen3's padded vocabulary (the tokenizer itself has 151669 ids)
BOS, EOS, PAD = 151643, 151645, 151643

# High byte of a bf16 (sign + top 7 exponent bits); the low byte's top bit completes the
# exponent. 0x3C: |x| in [2^-7, 2^-5); 0x3D: [2^-5, 2^-3).
SMALL, MEDIUM = 0x3C, 0x3D


def random_bf16(rng, count, high):
    """`count` bf16 values (little-endian bytes) of random sign with magnitude set by `high`."""
    low = rng.randbytes(count)
    signs = rng.randbytes(count)
    table = bytes(high if b < 128 else high | 0x80 for b in range(256))
    out = bytearray(2 * count)
    out[0::2] = low
    out[1::2] = signs.translate(table)
    return out


def ones_bf16(count):
    return bytearray(b"\x80\x3f" * count)  # 1.0


def to_dtype(bf16, dtype):
    if dtype == "bf16":
        return bytes(bf16)
    out = bytearray(2 * len(bf16))  # f32 = the bf16 bits in the upper half
    out[2::4] = bf16[0::2]
    out[3::4] = bf16[1::2]
    return bytes(out)


def tensors(rng):
    """(name, shape, bf16 bytes) in a fixed order, so a seed always gives the same model."""
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    yield "model.embed_tokens.weight", [VOCAB, HIDDEN], random_bf16(rng, VOCAB * HIDDEN, MEDIUM)
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", [HIDDEN], ones_bf16(HIDDEN)
        yield p + "post_attention_layernorm.weight", [HIDDEN], ones_bf16(HIDDEN)
        yield p + "self_attn.q_norm.weight", [HEAD_DIM], ones_bf16(HEAD_DIM)
        yield p + "self_attn.k_norm.weight", [HEAD_DIM], ones_bf16(HEAD_DIM)
        for name, rows, cols in (("self_attn.q_proj", q, HIDDEN), ("self_attn.k_proj", kv, HIDDEN),
                                 ("self_attn.v_proj", kv, HIDDEN), ("self_attn.o_proj", HIDDEN, q),
                                 ("mlp.gate_proj", INTERMEDIATE, HIDDEN),
                                 ("mlp.up_proj", INTERMEDIATE, HIDDEN),
                                 ("mlp.down_proj", HIDDEN, INTERMEDIATE)):
            yield p + name + ".weight", [rows, cols], random_bf16(rng, rows * cols, SMALL)
    yield "model.norm.weight", [HIDDEN], ones_bf16(HIDDEN)
    # lm_head is tied to the embedding (tie_word_embeddings), as in the small Qwen3 models.


def write_safetensors(path, items, dtype):
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, shape, data in items:
        blob = to_dtype(data, dtype)
        header[name] = {"dtype": "BF16" if dtype == "bf16" else "F32", "shape": shape,
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def config(dtype):
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": BOS,
        "eos_token_id": EOS,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "initializer_range": 0.02,
        "intermediate_size": INTERMEDIATE,
        "max_position_embeddings": 4096,
        "max_window_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "num_key_value_heads": KV_HEADS,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16" if dtype == "bf16" else "float32",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": VOCAB,
    }


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_tok = os.path.normpath(os.path.join(here, "..", "..", "shared", "data", "tokenizers",
                                                "qwen3"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="output directory (created)")
    ap.add_argument("--tokenizer", default=default_tok,
                    help="directory with tokenizer.json and tokenizer_config.json "
                         "(default ../shared/data/tokenizers/qwen3)")
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if not os.path.isfile(os.path.join(args.tokenizer, name)):
            sys.exit(f"make_demo_model: {args.tokenizer}/{name}: not found (see --tokenizer)")
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)
    write_safetensors(os.path.join(args.out, "model.safetensors"), tensors(rng), args.dtype)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config(args.dtype), f, indent=2)
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": BOS, "eos_token_id": [EOS, BOS], "do_sample": False,
                   "pad_token_id": PAD}, f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(args.tokenizer, name), os.path.join(args.out, name))
    print(args.out)


if __name__ == "__main__":
    main()
