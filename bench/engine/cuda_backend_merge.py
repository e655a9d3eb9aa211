# Merges the parts of bench/engine/cuda_backend.sh (decode.json and its repeats decode_2.json,
# ..., decode_fp32_kv.json, decode_fp8.json, decode_tp2.json, decode_tp2_one_way.json and
# decode_tp2_nccl.json from spark-decode-bench, kernels.json from spark-kernel-bench +
# sdpa_peer.py, peer.json and its repeats peer_2.json, ... from peer_torch_decode.py) into the
# results file: the ratios the CUDA
# backend is judged by, and the raw figures behind each. Ours and the peer's decode figures are
# the medians over the rounds (every round's figures are kept in raw.rounds).
# Usage: python3 cuda_backend_merge.py PARTS_DIR OUT.json
import datetime, glob, json, os, re, statistics, sys

parts, out = sys.argv[1], sys.argv[2]


def rounds(first, prefix):
    """first.json's content, then PARTS/prefix_2.json, prefix_3.json, ... in round order."""
    found = {int(m.group(1)): p for p in glob.glob(f"{parts}/{prefix}_*.json")
             if (m := re.fullmatch(rf"{re.escape(prefix)}_(\d+)\.json", os.path.basename(p)))}
    return [first] + [json.load(open(found[i])) for i in sorted(found)]


decode_rounds = rounds(json.load(open(f"{parts}/decode.json")), "decode")
decode = decode_rounds[0]  # the round with the prefill and the copy / GEMM ceilings
kernels = json.load(open(f"{parts}/kernels.json"))
peer_rounds = rounds(json.load(open(f"{parts}/peer.json")), "peer")
peer = dict(peer_rounds[0])
for key in ("b1_tok_s", "b32_tok_s"):
    peer[key] = statistics.median_low(p[key] for p in peer_rounds)
tp2_path = f"{parts}/decode_tp2.json"
tp2_runs = json.load(open(tp2_path))["decode"] if os.path.exists(tp2_path) else []
nccl_path = f"{parts}/decode_tp2_nccl.json"
one_way_path = f"{parts}/decode_tp2_one_way.json"
one_way_runs = json.load(open(one_way_path))["decode"] if os.path.exists(one_way_path) else []
nccl_runs = json.load(open(nccl_path))["decode"] if os.path.exists(nccl_path) else []
for d in nccl_runs:
    d["collectives"] = "nccl"
fp32_kv_path = f"{parts}/decode_fp32_kv.json"
fp32_kv = json.load(open(fp32_kv_path)) if os.path.exists(fp32_kv_path) else None
fp8_path = f"{parts}/decode_fp8.json"
fp8 = json.load(open(fp8_path)) if os.path.exists(fp8_path) else None

def run(tp, batch, part=None):
    """The decode row of (tp, batch) in `part` (default: decode.json)."""
    return next(d for d in (part or decode)["decode"] if d["tp"] == tp and d["batch"] == batch)


def median_run(tp, batch, key="tok_s"):
    """Our decode row of (tp, batch) with the median `key` over the rounds (the lower middle one
    for an even count), a real run's row, so its time and roofline ratio go with it."""
    rows = sorted((run(tp, batch, d) for d in decode_rounds), key=lambda d: d.get(key, 0))
    return rows[(len(rows) - 1) // 2]

def kernel(name, shape_start):
    return next(r for r in kernels["results"]
                if r["kernel"] == name and r["shape"].startswith(shape_start))

b1, b32 = median_run(1, 1), median_run(1, 32)
# Steps launched ahead of the host (spark-decode-bench's "ahead" rows, Model::LaunchArgMax): the
# host stages step i + 1 while the GPU runs step i, as the peer's loop never waits for its
# tokens. The headline decode ratios use them where the run measured them; the host-waits
# figures (each step's ids read back before the next is staged) stay beside them.
b1a, b32a = median_run(1, 1, "ahead_tok_s"), median_run(1, 32, "ahead_tok_s")
ahead = b1a.get("ahead_tok_s", 0) > 0 and b32a.get("ahead_tok_s", 0) > 0
b1e, b32e = median_run(1, 1, "engine_tok_s"), median_run(1, 32, "engine_tok_s")
engine = b1e.get("engine_tok_s", 0) > 0 and b32e.get("engine_tok_s", 0) > 0


def fp8_summary(f):
    r1, r32 = run(1, 1, f), run(1, 32, f)
    pre, pre16 = f.get("prefill"), decode.get("prefill")
    return {
        "decode_b1_ahead_tok_s": r1.get("ahead_tok_s"),
        "decode_b1_ahead_roofline_ratio": r1.get("ahead_roofline_ratio"),
        "decode_b1_tok_s": r1["tok_s"], "decode_b1_roofline_ratio": r1["roofline_ratio"],
        "decode_b1_vs_bf16": r1["tok_s"] / b1["tok_s"],
        "decode_b32_tok_s": r32["tok_s"], "decode_b32_vs_bf16": r32["tok_s"] / b32["tok_s"],
        "prefill_8k_seconds": pre["seconds"] if pre else None,
        "prefill_8k_speedup_vs_bf16": pre16["seconds"] / pre["seconds"] if pre and pre16 else None,
        "weight_bytes_streamed_per_step": f["weight_bytes_streamed_per_step"],
        "raw": {"decode": f["decode"], "prefill": pre},
    }
tp2 = next((d for d in tp2_runs if d["tp"] == 2 and d["batch"] == 1), None)
tp2_nccl = next((d for d in nccl_runs if d["tp"] == 2 and d["batch"] == 1), None)
tp2_one_way = next((d for d in one_way_runs if d["tp"] == 2 and d["batch"] == 1), None)
# The decode attention kernel of the engine's KV cache (bf16 with bf16 weights, the engine's
# default pairing: fp32 queries on tensor cores), at batch 32 and 4K context.
kv_dtype = decode.get("kv_dtype", "fp32")
attn = kernel("decode attention fp32" +
              (" q, bf16 cache, tensor cores" if kv_dtype == "bf16" else ""), "b32 ctx4096")
res = {
    "gpu": decode["gpu"],
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "decode_steps": ("launched ahead of the host (Model::LaunchArgMax)" if ahead
                     else "the host waits for each step's ids"),
    "decode_b1_roofline_ratio": b1a["ahead_roofline_ratio"] if ahead else b1["roofline_ratio"],
    "decode_b1_vs_torch_compile": (b1a["ahead_tok_s"] if ahead else b1["tok_s"]) / peer["b1_tok_s"],
    "decode_b32_vs_torch_compile": ((b32a["ahead_tok_s"] if ahead else b32["tok_s"]) /
                                    peer["b32_tok_s"]),
    "decode_host_waits": {
        "b1_roofline_ratio": b1["roofline_ratio"],
        "b1_vs_torch_compile": b1["tok_s"] / peer["b1_tok_s"],
        "b32_vs_torch_compile": b32["tok_s"] / peer["b32_tok_s"],
        "b1_host_gap_us_per_step": b1.get("host_gap_us_per_step"),
        "b32_host_gap_us_per_step": b32.get("host_gap_us_per_step"),
    },
    # The serving engine's loop (runtime::Engine over ModelStepRunner) over the same steps, where
    # the run measured it: medians over the rounds.
    "decode_engine": ({
        "b1_tok_s": b1e["engine_tok_s"], "b1_roofline_ratio": b1e["engine_roofline_ratio"],
        "b1_vs_torch_compile": b1e["engine_tok_s"] / peer["b1_tok_s"],
        "b32_tok_s": b32e["engine_tok_s"],
        "b32_vs_torch_compile": b32e["engine_tok_s"] / peer["b32_tok_s"],
    } if engine else None),
    "prefill_8k_vs_matmul_peak": decode["prefill"]["vs_matmul_peak"] if "prefill" in decode else None,
    "kv_dtype": kv_dtype,
    "decode_attention_bw_ratio": attn["ratio"],
    "prefill_attention_vs_sdpa": kernels.get("prefill_attention_vs_sdpa"),
    "prefill_attention_vs_sdpa_best": kernels.get("prefill_attention_vs_sdpa_best"),
    "tp2_vs_tp1_token_time": tp2["ms_per_step"] / b1["ms_per_step"] if tp2 else None,
    "tp2_in_graphs": tp2["graphs"] if tp2 else None,
    "tp2_nccl_vs_tp1_token_time": tp2_nccl["ms_per_step"] / b1["ms_per_step"] if tp2_nccl else None,
    # The peer all-reduce's opt-in one-way protocol (the figure above is the default's, signal).
    "tp2_one_way_vs_tp1_token_time": (tp2_one_way["ms_per_step"] / b1["ms_per_step"]
                                      if tp2_one_way else None),
    # fp8 weights (E4M3, 128 x 128 block scales), the same model and job: not an issue target,
    # set against our bf16 figures of this run.
    "fp8_weights": (fp8_summary(fp8) if fp8 else None),
    "raw": {
        "copy_bandwidth_gbs": decode["copy_bandwidth_gbs"],
        "bf16_matmul_peak_tflops": decode["bf16_matmul_peak_tflops"],
        "weight_bytes_streamed_per_step": decode["weight_bytes_streamed_per_step"],
        "ours_decode": [b1, b32] + tp2_runs + nccl_runs + one_way_runs,
        "ours_decode_ahead": [b1a, b32a] if ahead else None,
        "rounds": {
            "note": "each round's decode tokens/s; the ratios use the medians",
            "ours_b1_tok_s": [run(1, 1, d)["tok_s"] for d in decode_rounds],
            "ours_b32_tok_s": [run(1, 32, d)["tok_s"] for d in decode_rounds],
            "ours_b1_ahead_tok_s": [run(1, 1, d).get("ahead_tok_s") for d in decode_rounds],
            "ours_b32_ahead_tok_s": [run(1, 32, d).get("ahead_tok_s") for d in decode_rounds],
            "peer_b1_tok_s": [p["b1_tok_s"] for p in peer_rounds],
            "peer_b32_tok_s": [p["b32_tok_s"] for p in peer_rounds],
        },
        "ours_prefill": decode.get("prefill"),
        "ours_fp32_kv_cache": ({"decode": fp32_kv["decode"], "prefill": fp32_kv.get("prefill")}
                               if fp32_kv else None),
        "peer": peer,
        "decode_attention": [r for r in kernels["results"] if r["kernel"].startswith("decode attention")],
        "prefill_attention": {"ours": kernel("prefill attention bf16", "seq8192"),
                              "ours_all": [r for r in kernels["results"]
                                           if r["kernel"].startswith("prefill attention")],
                              "sdpa": kernels.get("sdpa_prefill_attention"),
                              "sdpa_backends": kernels.get("sdpa_prefill_attention_backends")},
    },
}
# Every figure is this run's: a run on a one-GPU machine measures no TP=2, and the results file
# says so instead of carrying an older run's figures into it.
NOT_MEASURED = "not measured"
for key in ("tp2_vs_tp1_token_time", "tp2_in_graphs", "tp2_nccl_vs_tp1_token_time",
            "tp2_one_way_vs_tp1_token_time"):
    if res[key] is None:
        res[key] = NOT_MEASURED
json.dump(res, open(out, "w"), indent=2)
print(json.dumps({k: v for k, v in res.items() if k != "raw"}, indent=2))
print(f"wrote {out}", file=sys.stderr)
