#!/usr/bin/env python3
"""Projects DeepSeek-V4.1-Flash serving on 2 and 4 DGX Sparks from spark-deepseek-bench figures.

A PROJECTION, not a measurement: it scales what one H200 measured (the fraction of the bytes
roofline a decode step reaches, the fraction of the FP8 GEMM peak prefill reaches) onto GB10's
memory bandwidth and tensor throughput, and adds the all-reduce latency of each topology (the
project's measured figures where it has them, FIELD_NOTES.md's field figures otherwise; every
input is labelled with where it comes from). Per decode step and rank:

    bytes  = replicated bytes (latents, mHC, compressor, indexer, router, Engram, the KV the
             single KV head makes every rank read) + sharded bytes (wq_b, wo_a, wo_b, shared and
             routed experts, the vocabulary-parallel head) / TP
    t_step = bytes / (GB10 bandwidth x decode efficiency at that batch) + 81 all-reduces
             (embedding, then attention and MoE of 40 layers) at the message size
    prefill tok/s = TP x GB10 FP8 peak x prefill efficiency / FLOPs per token (40 layers, the
             indexer's scores included; at 1M tokens these grow with the context)

Single stream with DSpark: the field's mean accepted length (3.6 tokens a step) over a step that
verifies 1 + 5 tokens, costed as a batch-6 step (the bytes of the experts six tokens touch), and
at least the measured verify / plain step ratio at k = 5 (--verify-cost: the speculative sweep's
batch-1 JSON, bench/results/speculative_h200/spec_b1.json, Qwen3-8B shape on the H200) times
the single-stream step; plus the draft of the next block: the bytes one 5-token draft of the
3-stage stack reads (spark-deepseek-bench's dspark_draft_bytes, from RESULTS or --draft-bytes:
its window-only blocks, the LM head and Markov head rows split by TP, the context keys' main_proj
per step replicated) at the single-stream decode efficiency, plus its 7 all-reduces.

    deepseek_v41_projection.py RESULTS.json [--verify-cost SPEC_B1.json]
        [--draft-bytes BYTES.json] [--write]
prints the table; --write stores it as RESULTS.json's "projection" section.
"""
import argparse
import json
import sys

# GB10 (FIELD_NOTES.md, "Hardware"): LPDDR5x at 273 GB/s; a healthy fp16 burn of 75-90
# TFLOP/s (field); FP8 at twice the bf16 rate (assumed: Blackwell's FP8 tensor rate doubles bf16).
GB10 = {"bandwidth_gbs": 273.0, "bf16_tflops": 90.0, "fp8_tflops": 180.0,
        "source": "FIELD_NOTES.md hardware figures; FP8 = 2 x bf16 assumed"}

# All-reduce latency in us by message size (bytes) per topology and transport, from
# FIELD_NOTES.md ("Small-message all-reduce", "NCCL on Sparks"): field figures, labelled.
ALLREDUCE = {
    "pair, one-shot RDMA (field)": [(10240, 10.9), (61440, 28.0), (491520, 94.0), (2097152, 308.0)],
    "pair, NCCL (field)": [(10240, 72.0), (61440, 111.0), (491520, 169.0), (2097152, 360.0)],
    "4-ring, one-shot RDMA (field)": [(10240, 16.9), (61440, 30.0), (491520, 100.0),
                                      (2097152, 320.0)],
    "4-ring, NCCL (field)": [(8192, 47.0), (10240, 91.0), (61440, 120.0), (491520, 185.0),
                             (2097152, 370.0)],
    "4 switched, one-shot RDMA (field)": [(10240, 12.0), (61440, 28.0), (491520, 94.0),
                                          (2097152, 308.0)],
    "4 switched, NCCL (field)": [(10240, 72.0), (61440, 111.0), (491520, 169.0),
                                 (2097152, 360.0)],
}
SETUPS = [
    ("2 Sparks, TP=2", 2, "pair, one-shot RDMA (field)", "pair, NCCL (field)"),
    ("4 Sparks, TP=4 ring", 4, "4-ring, one-shot RDMA (field)", "4-ring, NCCL (field)"),
    ("4 Sparks, TP=4 switched", 4, "4 switched, one-shot RDMA (field)", "4 switched, NCCL (field)"),
]
PUBLIC = "best public 4-Spark figures (FIELD_NOTES.md): ~90 tok/s single stream (DSpark k=5, " \
         "switched), 239 tok/s at 8 streams, prefill 4.7-4.9k tok/s on real text, 1M tokens in " \
         "324 s; SparkRing ring: 64-108 tok/s single stream, 1M TTFT 71.6 s"
ACCEPTED = 3.6  # DSpark mean accepted tokens per step (field)
HIDDEN, LAYERS = 5120, 40


def latency_us(points, size):
    """Linear interpolation in the (bytes, us) points; clamped at the ends."""
    if size <= points[0][0]:
        return points[0][1]
    for (s0, t0), (s1, t1) in zip(points, points[1:]):
        if size <= s1:
            return t0 + (t1 - t0) * (size - s0) / (s1 - s0)
    s0, t0 = points[-1]
    return t0 * size / s0


def step_bytes(flash, batch, tp):
    row = next(r for r in flash if r["batch"] == batch and r["context"] == 4096)
    sharded = row["layer_weights_sharded"] + row["routed_experts"] + row["head"]
    replicated = row["total"] - sharded
    return replicated + sharded / tp


def decode_efficiency(results, batch):
    rows = [r for r in results.get("decode", []) if r.get("measured") and r["batch"] == batch]
    return min(rows, key=lambda r: r["context"])["roofline_ratio"] if rows else None


def verify_ratio(spec):
    """verify / plain step time at k = 5 (the always-wrong drafter: every step verifies 6 rows)
    at batch 1, from spark-decode-bench --speculative's JSON; None without one."""
    if spec is None:
        return None
    rows = [r for r in spec.get("speculative", []) if r["batch"] == 1 and r["drafter"] == "wrong"]
    row = next((r for r in rows if r["k"] == 5), None)
    return row["step_time_vs_plain"] if row else None


def draft_seconds(draft, tp, transport, eff):
    """One single-stream DSpark draft (one block) and the context keys of the step, per rank."""
    row = next(r for r in draft if r["blocks"] == 1)
    sharded = row["layer_weights_sharded"] + row["routed_experts"] + row["head"] + \
        row["markov_head"]
    replicated = row["layer_weights"] - row["layer_weights_sharded"] + row["kv"] + \
        row["context_per_target_step"]
    mem_s = (replicated + sharded / tp) / (GB10["bandwidth_gbs"] * 1e9 * eff)
    reduces = 2 * row["stages"] + 1  # embedding, then attention and MoE of each stage
    ar_s = reduces * latency_us(ALLREDUCE[transport], 4 * HIDDEN * row["tokens"]) * 1e-6
    return mem_s + ar_s


def project(results, verify=None, draft=None):
    flash = results["flash_bytes_per_step"]
    prefill_eff = results.get("prefill_vs_fp8_peak")
    flops = {r["tokens"]: r["flops"] for r in results["flash_prefill_flops"]}
    effs = {b: decode_efficiency(results, b) for b in (1, 8)}
    if None in effs.values() or not prefill_eff:
        raise SystemExit("projection: the results hold no measured b1/b8 decode or prefill ratio")
    rows = []
    for name, tp, oneshot, nccl in SETUPS:
        for transport in (oneshot, nccl):
            out = {"setup": name, "transport": transport}
            for batch, key in ((1, "single_stream_tok_s"), (8, "eight_streams_tok_s")):
                bytes_rank = step_bytes(flash, batch, tp)
                mem_s = bytes_rank / (GB10["bandwidth_gbs"] * 1e9 * effs[batch])
                ar_s = (2 * LAYERS + 1) * latency_us(ALLREDUCE[transport], 4 * HIDDEN * batch) * 1e-6
                out[key] = batch / (mem_s + ar_s)
                out[f"b{batch}_step_ms"] = (mem_s + ar_s) * 1e3
                out[f"b{batch}_allreduce_share"] = ar_s / (mem_s + ar_s)
            # DSpark: 1 + 5 tokens verified in one step costed as a batch-6 step (bytes of the
            # experts six tokens touch), ACCEPTED tokens kept per step.
            verify_b = 6
            eff6 = effs[8]  # the nearest measured batch
            bytes6 = interpolate_bytes(flash, verify_b, tp)
            t6 = bytes6 / (GB10["bandwidth_gbs"] * 1e9 * eff6) + \
                (2 * LAYERS + 1) * latency_us(ALLREDUCE[transport], 4 * HIDDEN * verify_b) * 1e-6
            t1 = out["b1_step_ms"] * 1e-3
            out["dspark_verify_step_ms"] = t6 * 1e3
            out["dspark_verify_bound"] = "bytes of a batch-6 step"
            if verify is not None and verify * t1 > t6:
                t6 = verify * t1
                out["dspark_verify_step_ms"] = t6 * 1e3
                out["dspark_verify_bound"] = "measured verify/plain ratio x single-stream step"
            if draft is not None:
                t_draft = draft_seconds(draft, tp, transport, effs[1])
                out["dspark_draft_ms"] = t_draft * 1e3
                t6 += t_draft
            else:
                out["dspark_draft_ms"] = None  # not counted: no draft bytes
            out["single_stream_dspark_tok_s"] = ACCEPTED / t6
            per_token = flops[8192] / 8192
            rate = tp * GB10["fp8_tflops"] * 1e12 * prefill_eff
            out["prefill_tok_s"] = rate / per_token
            out["ttft_1m_s"] = flops[1 << 20] / rate
            rows.append(out)
    return rows


def interpolate_bytes(flash, batch, tp):
    """Step bytes for a batch between the measured ones (expected distinct experts grow
    smoothly with the batch; linear between the two nearest)."""
    batches = sorted({r["batch"] for r in flash if r["context"] == 4096})
    lo = max(b for b in batches if b <= batch)
    hi = min(b for b in batches if b >= batch)
    a, b = step_bytes(flash, lo, tp), step_bytes(flash, hi, tp)
    return a if hi == lo else a + (b - a) * (batch - lo) / (hi - lo)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results")
    ap.add_argument("--write", action="store_true", help="store the projection in RESULTS")
    ap.add_argument("--verify-cost", help="spark-decode-bench --speculative JSON at batch 1")
    ap.add_argument("--draft-bytes",
                    help="spark-deepseek-bench --describe --json output, for results without "
                         "dspark_draft_bytes")
    args = ap.parse_args()
    with open(args.results) as f:
        results = json.load(f)
    spec = None
    if args.verify_cost:
        with open(args.verify_cost) as f:
            spec = json.load(f)
    verify = verify_ratio(spec)
    if args.verify_cost and verify is None:
        raise SystemExit(f"projection: {args.verify_cost} has no batch-1 k=5 wrong-drafter row")
    draft = results.get("dspark_draft_bytes")
    draft_source = "RESULTS" if draft is not None else None
    if args.draft_bytes:
        with open(args.draft_bytes) as f:
            draft = json.load(f).get("dspark_draft_bytes")
        if draft is None:
            raise SystemExit(f"projection: {args.draft_bytes} has no dspark_draft_bytes")
        draft_source = args.draft_bytes
    rows = project(results, verify, draft)
    print("PROJECTION (not measured): DeepSeek-V4.1-Flash on DGX Sparks, from "
          f"{results.get('gpu', '?')} efficiencies (decode b1 {decode_efficiency(results, 1):.2f}, "
          f"b8 {decode_efficiency(results, 8):.2f} of the bytes roofline; prefill "
          f"{results['prefill_vs_fp8_peak']:.2f} of FP8 peak) and GB10 figures ({GB10['source']})")
    head = f"{'setup':<26} {'transport':<34} {'1 stream':>9} {'+DSpark':>8} {'8 streams':>10} " \
           f"{'prefill':>9} {'1M TTFT':>9}"
    print(head)
    for r in rows:
        print(f"{r['setup']:<26} {r['transport']:<34} {r['single_stream_tok_s']:9.1f} "
              f"{r['single_stream_dspark_tok_s']:8.1f} {r['eight_streams_tok_s']:10.1f} "
              f"{r['prefill_tok_s']:9.0f} {r['ttft_1m_s']:8.0f}s")
    if draft is None:
        print("+DSpark counts the verify step only: no dspark_draft_bytes in RESULTS "
              "(--draft-bytes)")
    print("public figures for comparison: " + PUBLIC)
    if args.write:
        results["projection"] = {
            "label": "projection, not a measurement",
            "gb10": GB10,
            "allreduce_us_by_bytes": ALLREDUCE,
            "dspark_accepted_tokens": ACCEPTED,
            "verify_vs_plain_step": {"ratio": verify, "source": args.verify_cost}
            if verify is not None else None,
            "dspark_draft": {"bytes": draft, "source": draft_source,
                             "cost": "bytes at the single-stream decode efficiency + 7 "
                                     "all-reduces"} if draft is not None else None,
            "public_figures": PUBLIC,
            "rows": rows,
        }
        with open(args.results, "w") as f:
            json.dump(results, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
