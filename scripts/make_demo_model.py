#!/usr/bin/env python3
"""Writes a tiny random-weight Qwen3 checkpoint that speaks the real Qwen3 vocabulary.

The model (hidden 64, 2 layers, 4 query heads, 2 KV heads, head_dim 16, intermediate 128,
vocab_size 151936 as Qwen3 pads it) exercises the whole serving path with real text prompts
(tokenizer.json is copied next to it) in seconds on a CPU; its output is gibberish. The weights
are deterministic for a given --seed. `--shape qwen3-8b` writes Qwen3-8B's shapes instead (36
layers, hidden 4096, 16 GB in bf16, in shards of about 4 GB with their index) for benchmarks;
each of its tensors repeats one random block of 4M values, so it is written in about a minute. Standard library only: values are built as bf16 bit
patterns from random bytes (random sign and mantissa, exponent in a narrow band), so no
per-element Python arithmetic is needed.

    python3 scripts/make_demo_model.py OUT_DIR [--tokenizer DIR] [--dtype bf16|f32] [--seed N]
        [--shape demo|qwen3-8b]
    spark-engine generate --model OUT_DIR --prompt "Hello" --max-tokens 8 --temperature 0 --tp 4
"""
import argparse
import json
import os
import random
import shutil
import struct
import sys

SHAPES = {
    "demo": {"hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2, "head_dim": 16,
             "intermediate": 128, "tie": True, "tile": None, "shard_bytes": None,
             "positions": 4096},
    # Qwen3-8B's own config.json: 40,960 positions (no RoPE scaling).
    "qwen3-8b": {"hidden": 4096, "layers": 36, "heads": 32, "kv_heads": 8, "head_dim": 128,
                 "intermediate": 12288, "tie": False, "tile": 1 << 22, "shard_bytes": 4 << 30,
                 "positions": 40960},
}
VOCAB = 151936  # Qwen3's padded vocabulary (the tokenizer itself has 151669 ids)
BOS, EOS, PAD = 151643, 151645, 151643

# High byte of a bf16 (sign + top 7 exponent bits); the low byte's top bit completes the
# exponent. 0x3C: |x| in [2^-7, 2^-5); 0x3D: [2^-5, 2^-3).
SMALL, MEDIUM = 0x3C, 0x3D


def random_bf16(rng, count, high, tile=None):
    """`count` bf16 values (little-endian bytes) of random sign with magnitude set by `high`;
    with `tile`, one random block of `tile` values repeated."""
    if tile and count > tile:
        block = random_bf16(rng, tile, high)
        reps, rest = divmod(count, tile)
        return block * reps + block[:2 * rest]
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


def tensor_shapes(shape):
    """(name, shape, magnitude) in a fixed order, so a seed always gives the same model;
    magnitude None means ones (norm weights)."""
    hidden, hd = shape["hidden"], shape["head_dim"]
    q, kv, inter = shape["heads"] * hd, shape["kv_heads"] * hd, shape["intermediate"]
    yield "model.embed_tokens.weight", [VOCAB, hidden], MEDIUM
    for i in range(shape["layers"]):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", [hidden], None
        yield p + "post_attention_layernorm.weight", [hidden], None
        yield p + "self_attn.q_norm.weight", [hd], None
        yield p + "self_attn.k_norm.weight", [hd], None
        for name, rows, cols in (("self_attn.q_proj", q, hidden), ("self_attn.k_proj", kv, hidden),
                                 ("self_attn.v_proj", kv, hidden), ("self_attn.o_proj", hidden, q),
                                 ("mlp.gate_proj", inter, hidden),
                                 ("mlp.up_proj", inter, hidden),
                                 ("mlp.down_proj", hidden, inter)):
            yield p + name + ".weight", [rows, cols], SMALL
    yield "model.norm.weight", [hidden], None
    # Tied models (the small Qwen3 ones) have no lm_head of their own.
    if not shape["tie"]:
        yield "lm_head.weight", [VOCAB, hidden], SMALL


def tensor_bytes(rng, dims, high, tile):
    count = 1
    for d in dims:
        count *= d
    return ones_bf16(count) if high is None else random_bf16(rng, count, high, tile)


def shards(shape, dtype):
    """The tensors split into shards of at most shape["shard_bytes"] (one shard when None)."""
    elem = 2 if dtype == "bf16" else 4
    groups, size = [[]], 0
    for name, dims, high in tensor_shapes(shape):
        n = elem
        for d in dims:
            n *= d
        if shape["shard_bytes"] and groups[-1] and size + n > shape["shard_bytes"]:
            groups.append([])
            size = 0
        groups[-1].append((name, dims, high))
        size += n
    return groups


def write_safetensors(path, items, dtype, rng, tile):
    """Writes one file; the header comes from the shapes, so each tensor is made as it is written."""
    elem = 2 if dtype == "bf16" else 4
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, dims, _ in items:
        n = elem
        for d in dims:
            n *= d
        header[name] = {"dtype": "BF16" if dtype == "bf16" else "F32", "shape": dims,
                        "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, dims, high in items:
            f.write(to_dtype(tensor_bytes(rng, dims, high, tile), dtype))


def write_checkpoint(out, shape, dtype, rng):
    groups = shards(shape, dtype)
    if len(groups) == 1:
        write_safetensors(os.path.join(out, "model.safetensors"), groups[0], dtype, rng,
                          shape["tile"])
        return
    weight_map = {}
    for i, items in enumerate(groups):
        name = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        write_safetensors(os.path.join(out, name), items, dtype, rng, shape["tile"])
        weight_map.update({t[0]: name for t in items})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=1)


def config(shape, dtype):
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": BOS,
        "eos_token_id": EOS,
        "head_dim": shape["head_dim"],
        "hidden_act": "silu",
        "hidden_size": shape["hidden"],
        "initializer_range": 0.02,
        "intermediate_size": shape["intermediate"],
        "max_position_embeddings": shape["positions"],
        "max_window_layers": shape["layers"],
        "num_attention_heads": shape["heads"],
        "num_hidden_layers": shape["layers"],
        "num_key_value_heads": shape["kv_heads"],
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": shape["tie"],
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
    ap.add_argument("--shape", choices=sorted(SHAPES), default="demo",
                    help="demo (tiny, the default) or qwen3-8b (Qwen3-8B's shapes, for benchmarks)")
    args = ap.parse_args()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if not os.path.isfile(os.path.join(args.tokenizer, name)):
            sys.exit(f"make_demo_model: {args.tokenizer}/{name}: not found (see --tokenizer)")
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)
    shape = SHAPES[args.shape]
    write_checkpoint(args.out, shape, args.dtype, rng)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config(shape, args.dtype), f, indent=2)
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": BOS, "eos_token_id": [EOS, BOS], "do_sample": False,
                   "pad_token_id": PAD}, f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(args.tokenizer, name), os.path.join(args.out, name))
    print(args.out)


if __name__ == "__main__":
    main()
