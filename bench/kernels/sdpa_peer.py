# PyTorch scaled_dot_product_attention (flash) on the shape spark-kernel-bench uses for prefill
# attention (one causal sequence of 8192 tokens, 32 query / 8 KV heads of 128, bf16), counted the
# same way (2 * seq^2 * head_dim * heads FLOPs). Adds the figure and our ratio to the results
# JSON that spark-kernel-bench wrote. Usage: python3 sdpa_peer.py RESULTS.json
import json, sys, torch, torch.nn.functional as F

path = sys.argv[1]
seq, heads, kv_heads, hd = 8192, 32, 8, 128
q = torch.randn(1, heads, seq, hd, device="cuda", dtype=torch.bfloat16)
k = torch.randn(1, kv_heads, seq, hd, device="cuda", dtype=torch.bfloat16)
v = torch.randn(1, kv_heads, seq, hd, device="cuda", dtype=torch.bfloat16)
run = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
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
ms = sorted(times)[2]
tflops = 2.0 * seq * seq * hd * heads / (ms * 1e-3) / 1e12
results = json.load(open(path))
ours = next(r for r in results["results"] if r["kernel"] == "prefill attention bf16")
results["sdpa_prefill_attention"] = {"shape": f"seq{seq} causal", "time_us": ms * 1e3,
                                     "tflops": tflops, "torch": torch.__version__}
results["prefill_attention_vs_sdpa"] = ours["achieved"] / tflops
json.dump(results, open(path, "w"), indent=2)
print(f"sdpa prefill attention seq{seq}: {ms * 1e3:.1f} us, {tflops:.1f} TFLOP/s; "
      f"ours {ours['achieved']:.1f} TFLOP/s = {100 * ours['achieved'] / tflops:.1f}% of sdpa")
