#!/usr/bin/env python3
"""`spark-engine serve` over HTTPS as a user meets it: `sparkctl tls selfsigned` makes the files,
the official `openai` client pins cert.pem as its CA (chat and an SSE stream), the fingerprint
sparkctl printed is the one the server presents, a client without the CA and a plain HTTP client
are refused cleanly, and SIGHUP serves a new certificate to new connections. Exits 77 (skipped)
without the `openai` package.

    serve_tls_test.py --engine build/bin/spark-engine --sparkctl build/bin/sparkctl
        --tokenizer ../shared/data/tokenizers/qwen3 --make-model scripts/make_demo_model.py
"""
import argparse
import hashlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

try:
    import openai
except ImportError:
    print("SKIPPED: the `openai` Python package is missing (scripts/install-test-python.sh)")
    sys.exit(77)

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def selfsigned(sparkctl, out):
    r = subprocess.run([sparkctl, "tls", "selfsigned", "--out", out, "--name", "127.0.0.1",
                        "--name", "localhost", "--force", "--json"], capture_output=True, text=True)
    doc = json.loads(r.stdout)
    check(r.returncode == 0 and doc["schema"] == "sparkctl-tls-selfsigned/v1" and
          oct(os.stat(doc["key"]).st_mode & 0o777) == "0o600", f"tls selfsigned: {doc}")
    return doc


def presented_fingerprint(port):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        with ctx.wrap_socket(s) as t:
            der = t.getpeercert(binary_form=True)
    d = hashlib.sha256(der).hexdigest().upper()
    return ":".join(d[i:i + 2] for i in range(0, len(d), 2))


def client(port, cafile, key):
    http = openai.DefaultHttpxClient(verify=ssl.create_default_context(cafile=cafile))
    return openai.OpenAI(base_url=f"https://127.0.0.1:{port}/v1", api_key=key, max_retries=0,
                         timeout=120, http_client=http)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", required=True)
    ap.add_argument("--sparkctl", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--make-model", required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    model = os.path.join(tmp, "demo")
    subprocess.run([sys.executable, a.make_model, model, "--tokenizer", a.tokenizer, "--dtype",
                    "f32"], check=True, stdout=subprocess.DEVNULL)
    tls_dir = os.path.join(tmp, "tls")
    doc = selfsigned(a.sparkctl, tls_dir)
    key = "sk-test-key-0123456789abcdef"
    keyfile = os.path.join(tmp, "keys.txt")
    open(keyfile, "w").write(key + "\n")
    proc = subprocess.Popen([a.engine, "serve", "--model", model, "--port", "0",
                             "--served-model-name", "demo", "--threads", "2",
                             "--api-key-file", keyfile, "--ssl-certfile", doc["cert"],
                             "--ssl-keyfile", doc["key"]], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        check(line.startswith("serving demo on https://127.0.0.1:"), f"announces https: {line!r}")
        port = int(line.rsplit(":", 1)[1])
        check(presented_fingerprint(port) == doc["sha256_fingerprint"],
              "the server presents the certificate whose fingerprint sparkctl printed")
        c = client(port, doc["cert"], key)
        r = c.chat.completions.create(model="demo", messages=[{"role": "user", "content": "hi"}],
                                      max_tokens=6)
        check(r.choices[0].finish_reason in ("stop", "length") and r.usage.completion_tokens > 0,
              f"chat over TLS with the CA pinned: {r.usage}")
        chunks = list(c.chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "x"}], max_tokens=5,
            stream=True, stream_options={"include_usage": True},
            extra_body={"min_tokens": 5, "ignore_eos": True}))
        check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5,
              f"SSE stream over TLS: {len(chunks)} chunks, usage {chunks[-1].usage}")
        try:
            openai.OpenAI(base_url=f"https://127.0.0.1:{port}/v1", api_key=key, max_retries=0,
                          timeout=20).models.list()
            check(False, "a client without the CA pinned is refused")
        except openai.APIConnectionError:
            check(True, "a client without the CA pinned is refused")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            while True:
                piece = s.recv(4096)
                if not piece:
                    break
                got += piece
        check(got.startswith(b"HTTP/1.1 400 ") and b"use https://" in got,
              f"plain HTTP to the TLS port gets a plain 400: {got[:80]!r}")
        live = c.chat.completions.create(model="demo", messages=[{"role": "user", "content": "y"}],
                                         max_tokens=200, stream=True,
                                         extra_body={"min_tokens": 200, "ignore_eos": True})
        first = next(iter(live))
        new = selfsigned(a.sparkctl, tls_dir)  # New files in place, then SIGHUP.
        proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 20
        while time.time() < deadline and presented_fingerprint(port) != new["sha256_fingerprint"]:
            time.sleep(0.2)
        check(presented_fingerprint(port) == new["sha256_fingerprint"],
              "SIGHUP: new connections get the new certificate")
        rest = list(live)
        check(first is not None and len(rest) >= 199,
              f"a stream open across the reload finishes ({1 + len(rest)} chunks)")
        r = client(port, new["cert"], key).models.list()
        check([m.id for m in r.data] == ["demo"], "a client pinning the new certificate is served")
        out = os.path.join(tmp, "bench.json")
        r = subprocess.run([a.sparkctl, "bench", "serve", "--url", f"https://127.0.0.1:{port}",
                            "--cacert", new["cert"], "--api-key-file", keyfile, "--concurrency",
                            "2", "--context", "64", "--output-tokens", "8", "--repeats", "1",
                            "--out", out], capture_output=True, text=True, timeout=300)
        doc = json.load(open(out)) if os.path.exists(out) else {}
        streams = [s for c_ in doc.get("cells", []) for rnd in c_["rounds"] for s in rnd]
        check(r.returncode == 0 and len(streams) == 2 and
              all(s["completion_tokens"] == 8 for s in streams),
              f"sparkctl bench serve over https with --cacert: rc {r.returncode} {r.stderr[-300:]}")
        r = subprocess.run([a.sparkctl, "bench", "serve", "--url", f"https://127.0.0.1:{port}",
                            "--api-key-file", keyfile, "--concurrency", "1", "--context", "64",
                            "--repeats", "1"], capture_output=True, text=True, timeout=120)
        check(r.returncode == 2 and "certificate verify failed" in r.stderr and
              "--cacert" in r.stderr,
              f"sparkctl without --cacert refuses the self-signed server: {r.stderr.strip()[-300:]}")
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(60)
    check(rc == 0, f"serve exits 0 after SIGTERM (got {rc})")
    print(f"{len(failures)} failure(s)" if failures else "all ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
