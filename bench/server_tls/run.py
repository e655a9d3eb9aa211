#!/usr/bin/env python3
"""The cost of TLS in `spark-engine serve`: requests/s and SSE tokens/s on the random-weight
Qwen3 demo checkpoint (CPU backend), the same server in clear text and over HTTPS, measured by
`server_tls_load` (tls_load.cc). Prints a table and writes bench/server_tls/results.json.

    bench/server_tls/run.py [--build build] [--seconds 10] [--concurrency 8] [--tokens 64]
        [--rounds 2] [--threads 1]

Workloads (each for --seconds, --concurrency client threads on 127.0.0.1):
  requests, keep-alive   one-token chat completions over one connection per client
  requests, new conn.    the same, one connection (and, over TLS, one full handshake) each
  stream                 streamed chat completions of --tokens tokens (SSE events)
Rounds alternate clear text and TLS so that drift in the machine's load hits both alike. The
server's CPU time per request or token (from /proc) is reported beside the rates: on a shared
machine it moves far less than the rates do.

Then the same server with a zero-cost model (`server_bench --tls`, bench/server/NOTES.md), where
nothing hides the HTTP and TLS work: 64 streams of 256 tokens, and 64 one-token requests (one
connection and, over TLS, one handshake each); microseconds of wall time per token or request.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKLOADS = [("requests, keep-alive", ["--workload", "requests", "--reuse"]),
             ("requests, new conn.", ["--workload", "requests"]),
             ("stream", ["--workload", "stream"])]


def serve(a, model, tls_dir):
    argv = [os.path.join(a.build, "bin", "spark-engine"), "serve", "--model", model, "--port", "0",
            "--served-model-name", "demo", "--threads", str(a.threads), "--log-level", "warn"]
    if tls_dir:
        argv += ["--ssl-certfile", os.path.join(tls_dir, "cert.pem"),
                 "--ssl-keyfile", os.path.join(tls_dir, "key.pem")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "serving" not in line:
        proc.kill()
        sys.exit(f"spark-engine serve did not start: {line!r}")
    return proc, int(line.rsplit(":", 1)[1])


def cpu_seconds(pid):
    """User + system CPU time of a process (and its threads) so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load(a, port, tls_dir, extra, seconds=None):
    argv = [os.path.join(a.build, "bin", "server_tls_load"), "--port", str(port),
            "--concurrency", str(a.concurrency), "--seconds", str(seconds or a.seconds),
            "--tokens", str(a.tokens)] + extra
    if tls_dir:
        argv += ["--cacert", os.path.join(tls_dir, "cert.pem")]
    r = subprocess.run(argv, capture_output=True, text=True)
    if not r.stdout.strip():
        sys.exit(f"server_tls_load failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="engine CPU threads")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "server_tls", "results.json"))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    model = os.path.join(tmp, "demo")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_demo_model.py"), model,
                    "--tokenizer", os.path.join(ROOT, "..", "shared", "data", "tokenizers", "qwen3"),
                    "--dtype", "f32"], check=True, stdout=subprocess.DEVNULL)
    tls_dir = os.path.join(tmp, "tls")
    subprocess.run([os.path.join(a.build, "bin", "sparkctl"), "tls", "selfsigned", "--out", tls_dir,
                    "--name", "127.0.0.1"], check=True, stdout=subprocess.DEVNULL)
    runs = []
    for rnd in range(a.rounds):
        for mode in ("http", "https"):
            proc, port = serve(a, model, tls_dir if mode == "https" else None)
            try:
                load(a, port, tls_dir if mode == "https" else None,
                     ["--workload", "requests", "--reuse"], seconds=1)  # Warm-up.
                for name, extra in WORKLOADS:
                    cpu0 = cpu_seconds(proc.pid)
                    r = load(a, port, tls_dir if mode == "https" else None, extra)
                    cpu = cpu_seconds(proc.pid) - cpu0
                    r.update({"round": rnd + 1, "mode": mode, "name": name, "server_cpu_s": cpu,
                              "server_cpu_ms_per_request": 1e3 * cpu / max(1, r["requests"]),
                              "server_cpu_us_per_token": 1e6 * cpu / max(1, r["tokens"])})
                    runs.append(r)
                    print(f"round {rnd + 1} {mode:5} {name:22} {r['requests_per_s']:8.1f} req/s "
                          f"{r['tokens_per_s']:9.1f} tok/s  server CPU "
                          f"{r['server_cpu_ms_per_request']:.2f} ms/req  errors {r['errors']}",
                          flush=True)
            finally:
                proc.terminate()
                proc.wait(60)
    print()
    print("| workload | rate | http | https | TLS cost (rate) | server CPU per unit, http | "
          "https | TLS cost (CPU) |")
    print("|---|---|---|---|---|---|---|---|")
    summary = []
    for name, _ in WORKLOADS:
        stream = name == "stream"
        rate = "tokens_per_s" if stream else "requests_per_s"
        cpu = "server_cpu_us_per_token" if stream else "server_cpu_ms_per_request"

        def values(mode, key):
            return [r[key] for r in runs if r["name"] == name and r["mode"] == mode]

        def mean(xs):
            return sum(xs) / len(xs)

        def span(xs):
            return f"{mean(xs):.1f} ({min(xs):.1f}-{max(xs):.1f})" if len(xs) > 1 else f"{xs[0]:.1f}"

        p_rate, t_rate = mean(values("http", rate)), mean(values("https", rate))
        p_cpu, t_cpu = mean(values("http", cpu)), mean(values("https", cpu))
        entry = {"workload": name, "rate": rate, "http": p_rate, "https": t_rate,
                 "rate_cost_percent": 100.0 * (p_rate - t_rate) / p_rate if p_rate else 0.0,
                 "cpu_metric": cpu, "http_cpu": p_cpu, "https_cpu": t_cpu,
                 "cpu_cost_percent": 100.0 * (t_cpu - p_cpu) / p_cpu if p_cpu else 0.0}
        summary.append(entry)
        unit = "us/token" if stream else "ms/request"
        print(f"| {name} | {'tok/s' if stream else 'req/s'} | {span(values('http', rate))} | "
              f"{span(values('https', rate))} | {entry['rate_cost_percent']:.1f}% | "
              f"{span(values('http', cpu))} {unit} | {span(values('https', cpu))} {unit} | "
              f"{entry['cpu_cost_percent']:+.1f}% |")
    zero = []
    for rnd in range(a.rounds):
        for tokens in (256, 1):
            path = os.path.join(tmp, f"zero-{rnd}-{tokens}.json")
            subprocess.run([os.path.join(a.build, "bin", "server_bench"), "--tls", "--clients", "64",
                            "--tokens", str(tokens), "--json", path], check=True,
                           stdout=subprocess.DEVNULL)
            for r in json.load(open(path))["runs"]:
                if r["run"] != "engine":
                    r.update({"round": rnd + 1, "tokens_per_stream": tokens})
                    zero.append(r)
    print()
    print("| zero-cost model, 64 clients | http us/token | https us/token | TLS adds |")
    print("|---|---|---|---|")
    zero_summary = []
    for tokens in (256, 1):
        def us(run):
            xs = [r["us_per_request_step"] for r in zero
                  if r["run"] == run and r["tokens_per_stream"] == tokens]
            return sum(xs) / len(xs), min(xs), max(xs)
        p, t = us("server"), us("server-tls")
        label = f"{tokens} tokens per stream" if tokens > 1 else "1 token per request (new conn.)"
        zero_summary.append({"workload": label, "http_us_per_token": p[0],
                             "https_us_per_token": t[0], "tls_adds_us": t[0] - p[0]})
        print(f"| {label} | {p[0]:.1f} ({p[1]:.1f}-{p[2]:.1f}) | {t[0]:.1f} ({t[1]:.1f}-{t[2]:.1f}) "
              f"| {t[0] - p[0]:+.1f} us |")
    doc = {"schema": "spark-bench-server-tls/v1",
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "machine": {"host": platform.node(), "cpus": os.cpu_count(),
                       "loadavg": os.getloadavg()},
           "options": {"seconds": a.seconds, "concurrency": a.concurrency, "tokens": a.tokens,
                       "rounds": a.rounds, "engine_threads": a.threads},
           "summary": summary, "runs": runs, "zero_cost_summary": zero_summary,
           "zero_cost_runs": zero}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=2)
    print(f"\nwrote {a.out}")
    return 0 if all(r["errors"] == 0 for r in runs + zero) else 2


if __name__ == "__main__":
    sys.exit(main())
