# PyTorch scaled_dot_product_attention on the shape spark-kernel-bench uses for prefill attention
# (one causal sequence of 8192 tokens, 32 query / 8 KV heads of 128, bf16), counted the same way
# (2 * seq^2 * head_dim * heads FLOPs), once per SDPA backend this PyTorch can run on the shape:
# flash (PyTorch's FlashAttention-2 kernels, the reference), cudnn (cuDNN's fused
# attention, wgmma on Hopper) and default (whatever PyTorch picks). Adds the figures and our
# ratios to the results JSON that spark-kernel-bench wrote; prefill_attention_vs_sdpa is against
# flash, prefill_attention_vs_sdpa_best against the fastest backend.
# Usage: python3 sdpa_peer.py RESULTS.json
import json, sys, torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

path = sys.argv[1]
seq, heads, kv_heads, hd = 8192, 32, 8, 128
q = torch.randn(1, heads, seq, hd, device="cuda", dtype=torch.bfloat16)
k = torch.randn(1, kv_heads, seq, hd, device="cuda", dtype=torch.bfloat16)
v = torch.randn(1, kv_heads, seq, hd, device="cuda", dtype=torch.bfloat16)
group = heads // kv_heads
k_full, v_full = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)


def time_ms(run):
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(10):
            run()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 10)
    return sorted(times)[2]


def measure(backend):
    """(ms, how) for one backend, GQA in the kernel where it supports it, else K/V expanded."""
    variants = [("enable_gqa", lambda: F.scaled_dot_product_attention(
                    q, k, v, is_causal=True, enable_gqa=True)),
                ("expanded kv", lambda: F.scaled_dot_product_attention(
                    q, k_full, v_full, is_causal=True))]
    errors = []
    for how, run in variants:
        try:
            if backend is None:
                return time_ms(run), how
            with sdpa_kernel(backend):
                return time_ms(run), how
        except RuntimeError as e:
            errors.append(str(e).splitlines()[0][:120])
    raise RuntimeError("; ".join(errors))


results = json.load(open(path))
ours = next(r for r in results["results"] if r["kernel"] == "prefill attention bf16")
flops = 2.0 * seq * seq * hd * heads
peers = {}
for name, backend in [("flash", SDPBackend.FLASH_ATTENTION),
                      ("cudnn", SDPBackend.CUDNN_ATTENTION), ("default", None)]:
    try:
        ms, how = measure(backend)
    except RuntimeError as e:
        print(f"sdpa {name}: not available here ({e})", file=sys.stderr)
        continue
    tflops = flops / (ms * 1e-3) / 1e12
    peers[name] = {"shape": f"seq{seq} causal", "time_us": ms * 1e3, "tflops": tflops,
                   "gqa": how, "torch": torch.__version__}
    print(f"sdpa {name} ({how}) seq{seq}: {ms * 1e3:.1f} us, {tflops:.1f} TFLOP/s; "
          f"ours {ours['achieved']:.1f} TFLOP/s = {100 * ours['achieved'] / tflops:.1f}%")
if "flash" not in peers:
    sys.exit("sdpa_peer.py: PyTorch's flash backend did not run on this GPU")
best = max(peers.values(), key=lambda p: p["tflops"])
results["sdpa_prefill_attention"] = peers["flash"]
results["sdpa_prefill_attention_backends"] = peers
results["prefill_attention_vs_sdpa"] = ours["achieved"] / peers["flash"]["tflops"]
results["prefill_attention_vs_sdpa_best"] = ours["achieved"] / best["tflops"]
json.dump(results, open(path, "w"), indent=2)
