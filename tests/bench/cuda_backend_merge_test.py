# bench/engine/cuda_backend_merge.py on synthetic parts: the ratios to the peer are of the
# medians over the rounds (decode.json, decode_2.json, ..., peer.json, peer_2.json, ...), rounds
# in numeric order, the median decode row a real run's row, and the fp8 / fp32-cache parts not
# taken for rounds.
import json, os, subprocess, sys, tempfile, unittest

MERGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "engine",
                     "cuda_backend_merge.py")


def decode_part(b1, b32, prefill=True, ahead=None, engine=None):
    """ahead / engine: (b1, b32) tokens/s of the steps launched ahead of the host and of the
    serving engine's loop, or none measured."""
    rows = [{"tp": 1, "batch": b, "tok_s": t, "ms_per_step": 1000.0 * b / t,
             "roofline_ratio": t / 300.0, "graphs": True} for b, t in ((1, b1), (32, b32))]
    for row, t in zip(rows, ahead or ()):
        row.update({"ahead_tok_s": t, "ahead_roofline_ratio": t / 300.0})
    for row, t in zip(rows, engine or ()):
        row.update({"engine_tok_s": t, "engine_roofline_ratio": t / 300.0})
    part = {"gpu": "test GPU", "copy_bandwidth_gbs": 4000.0, "bf16_matmul_peak_tflops": 800.0,
            "weight_bytes_streamed_per_step": 1, "kv_dtype": "bf16", "decode": rows}
    if prefill:
        part["prefill"] = {"seconds": 0.25, "vs_matmul_peak": 0.6}
    return part


KERNELS = {"results": [
    {"kernel": "decode attention fp32 q, bf16 cache, tensor cores", "shape": "b32 ctx4096 splits8",
     "ratio": 0.8},
    {"kernel": "prefill attention bf16", "shape": "seq8192 causal", "ratio": 0.4}],
    "prefill_attention_vs_sdpa": 0.9, "prefill_attention_vs_sdpa_best": 0.5}


class MergeTest(unittest.TestCase):
    def merge(self, parts, previous=None):
        """previous: the results file the merge replaces, when there is one."""
        with tempfile.TemporaryDirectory() as d:
            for name, content in parts.items():
                with open(os.path.join(d, name), "w") as f:
                    json.dump(content, f)
            out = os.path.join(d, "out.json")
            if previous is not None:
                with open(out, "w") as f:
                    json.dump(previous, f)
            subprocess.run([sys.executable, MERGE, d, out], check=True, capture_output=True)
            with open(out) as f:
                return json.load(f)

    def test_ratios_are_of_the_medians_over_the_rounds(self):
        parts = {"decode.json": decode_part(200.0, 5000.0), "kernels.json": KERNELS,
                 "decode_fp8.json": decode_part(900.0, 9000.0),
                 "decode_fp32_kv.json": decode_part(1.0, 1.0)}
        ours = [(200.0, 5000.0), (230.0, 5600.0), (210.0, 5900.0), (190.0, 5500.0),
                (220.0, 5700.0)]
        peer = [(180.0, 4700.0), (170.0, 4900.0), (200.0, 4600.0), (185.0, 4800.0),
                (175.0, 4500.0)]
        for i, ((b1, b32), (p1, p32)) in enumerate(zip(ours, peer), start=1):
            if i > 1:
                parts[f"decode_{i}.json"] = decode_part(b1, b32, prefill=False)
            parts["peer.json" if i == 1 else f"peer_{i}.json"] = {
                "gpu": "test GPU", "b1_tok_s": p1, "b32_tok_s": p32}
        # Round 10 (not 1 < 10 < 2 in name order) is the last: its figures end the lists.
        parts["decode_10.json"] = decode_part(240.0, 6000.0, prefill=False)
        parts["peer_10.json"] = {"gpu": "test GPU", "b1_tok_s": 160.0, "b32_tok_s": 4400.0}
        res = self.merge(parts)
        rounds = res["raw"]["rounds"]
        self.assertEqual(rounds["ours_b1_tok_s"], [200.0, 230.0, 210.0, 190.0, 220.0, 240.0])
        self.assertEqual(rounds["peer_b32_tok_s"], [4700.0, 4900.0, 4600.0, 4800.0, 4500.0, 4400.0])
        # Six rounds: the lower middle values, ours 210 / 5600, the peer's 175 / 4600.
        self.assertAlmostEqual(res["decode_b1_vs_torch_compile"], 210.0 / 175.0)
        self.assertAlmostEqual(res["decode_b32_vs_torch_compile"], 5600.0 / 4600.0)
        b1 = res["raw"]["ours_decode"][0]
        self.assertEqual((b1["batch"], b1["tok_s"]), (1, 210.0))
        self.assertAlmostEqual(b1["ms_per_step"], 1000.0 / 210.0)  # that run's own time
        self.assertAlmostEqual(res["decode_b1_roofline_ratio"], 210.0 / 300.0)
        self.assertEqual(res["raw"]["peer"]["b1_tok_s"], 175.0)
        self.assertAlmostEqual(res["fp8_weights"]["decode_b1_vs_bf16"], 900.0 / 210.0)
        self.assertAlmostEqual(res["prefill_8k_vs_matmul_peak"], 0.6)

    def test_steps_launched_ahead_make_the_headline_where_measured(self):
        parts = {"decode.json": decode_part(200.0, 5000.0, ahead=(215.0, 5300.0),
                                            engine=(214.0, 5200.0)),
                 "decode_2.json": decode_part(205.0, 5100.0, prefill=False, ahead=(212.0, 5500.0),
                                              engine=(210.0, 5450.0)),
                 "decode_3.json": decode_part(190.0, 5200.0, prefill=False, ahead=(220.0, 5400.0),
                                              engine=(218.0, 5350.0)),
                 "kernels.json": KERNELS,
                 "peer.json": {"gpu": "test GPU", "b1_tok_s": 160.0, "b32_tok_s": 4000.0}}
        res = self.merge(parts)
        self.assertIn("ahead", res["decode_steps"])
        # Medians of the ahead figures (215, 5400), each from its own round's row.
        self.assertAlmostEqual(res["decode_b1_vs_torch_compile"], 215.0 / 160.0)
        self.assertAlmostEqual(res["decode_b32_vs_torch_compile"], 5400.0 / 4000.0)
        self.assertAlmostEqual(res["decode_b1_roofline_ratio"], 215.0 / 300.0)
        # The host-waits figures stay beside them (medians 200, 5100).
        waits = res["decode_host_waits"]
        self.assertAlmostEqual(waits["b1_vs_torch_compile"], 200.0 / 160.0)
        self.assertAlmostEqual(waits["b32_vs_torch_compile"], 5100.0 / 4000.0)
        self.assertEqual(res["raw"]["rounds"]["ours_b1_ahead_tok_s"], [215.0, 212.0, 220.0])
        # The serving engine's loop: its own medians (214, 5350).
        self.assertAlmostEqual(res["decode_engine"]["b1_vs_torch_compile"], 214.0 / 160.0)
        self.assertAlmostEqual(res["decode_engine"]["b32_tok_s"], 5350.0)

    def test_one_round_is_that_round(self):
        res = self.merge({"decode.json": decode_part(200.0, 5000.0), "kernels.json": KERNELS,
                          "peer.json": {"gpu": "test GPU", "b1_tok_s": 160.0, "b32_tok_s": 4000.0}})
        self.assertAlmostEqual(res["decode_b1_vs_torch_compile"], 200.0 / 160.0)
        self.assertAlmostEqual(res["decode_b32_vs_torch_compile"], 5000.0 / 4000.0)
        self.assertEqual(res["raw"]["rounds"]["peer_b1_tok_s"], [160.0])
        self.assertIn("waits", res["decode_steps"])  # no ahead figures: the host-waits ones
        self.assertIsNone(res["decode_engine"])

    def test_tp2_ratios_are_per_protocol_against_tp1(self):
        def tp2(ms):
            return {"decode": [{"tp": 2, "batch": 1, "ms_per_step": ms, "graphs": True}]}
        res = self.merge({"decode.json": decode_part(200.0, 5000.0), "kernels.json": KERNELS,
                          "peer.json": {"gpu": "test GPU", "b1_tok_s": 160.0, "b32_tok_s": 4000.0},
                          "decode_tp2.json": tp2(3.0), "decode_tp2_one_way.json": tp2(2.8),
                          "decode_tp2_nccl.json": tp2(3.5)})
        # TP=1 takes 5 ms a step at 200 tok/s.
        self.assertAlmostEqual(res["tp2_vs_tp1_token_time"], 3.0 / 5.0)
        self.assertAlmostEqual(res["tp2_one_way_vs_tp1_token_time"], 2.8 / 5.0)
        self.assertAlmostEqual(res["tp2_nccl_vs_tp1_token_time"], 3.5 / 5.0)
        self.assertEqual(len([d for d in res["raw"]["ours_decode"] if d["tp"] == 2]), 3)

    def test_figures_not_measured_are_not_carried_over_from_an_older_file(self):
        parts = {"decode.json": decode_part(200.0, 5000.0), "kernels.json": KERNELS,
                 "peer.json": {"gpu": "test GPU", "b1_tok_s": 160.0, "b32_tok_s": 4000.0}}
        older = {"date": "2026-01-01T00:00:00Z", "gpu": "old GPU", "tp2_vs_tp1_token_time": 0.7,
                 "tp2_in_graphs": True, "tp2_nccl_vs_tp1_token_time": 0.9,
                 "tp2_one_way_vs_tp1_token_time": 0.65,
                 "raw": {"ours_decode": [{"tp": 2, "batch": 1, "ms_per_step": 3.5}]}}
        res = self.merge(parts, previous=older)
        for key in ("tp2_vs_tp1_token_time", "tp2_in_graphs", "tp2_nccl_vs_tp1_token_time",
                    "tp2_one_way_vs_tp1_token_time"):
            self.assertEqual(res[key], "not measured", key)
        self.assertNotIn("tp2_measured_in", res)
        self.assertEqual([d for d in res["raw"]["ours_decode"] if d["tp"] == 2], [])


if __name__ == "__main__":
    unittest.main()
