#!/usr/bin/env python3
"""`sparkctl dashboard` in a real browser (Debian's chromium and chromium-driver, driven by
selenium) on a simulated ring of four serving the demo model with the CPU engine.

Checks: the page shows all four nodes and the model ready; its MemAvailable and rank phases equal
`sparkctl status --json` read at the same moment; while a load runs, the page's numbers move
(steps, generation tok/s); a killed rank is marked (event log and rank row) within the monitor's
5 s window; a preflight finding (spark-1's CMA gone) and its clearing reach the event log; the
browser logs no console errors. Screenshots go to --out (dashboard.png under load,
dashboard-degraded.png after the kill).

    dashboard_browser_test.py --sparkctl build/bin/sparkctl --engine build/bin/spark-engine \
        --make-model scripts/make_demo_model.py --out build/dashboard-e2e
Exit status: 0 pass, 1 fail, 77 skipped (not root: network namespaces need it).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

NAME = "dashbrw"  # the simulated cluster (short: it names network namespaces and links)
PORT = 8000


def sh(cmd, check=False, timeout=600):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{cmd}\nexit {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def first_json(text):
    start = text.find("{")
    return json.loads(text[start:]) if start >= 0 else {}


class Failures:
    def __init__(self):
        self.items = []

    def check(self, ok, message):
        print(("ok    " if ok else "FAIL  ") + message, flush=True)
        if not ok:
            self.items.append(message)


def wait(predicate, seconds, step=0.2):
    end = time.time() + seconds
    while time.time() < end:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sparkctl", required=True)
    ap.add_argument("--engine", required=True)
    ap.add_argument("--make-model", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIPPED: needs root (network namespaces)")
        return 77
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.common.by import By
    except ImportError:
        print("FAIL: the selenium package is missing: run scripts/install-test-python.sh")
        return 1
    for tool in ("chromium", "chromedriver"):
        if not shutil.which(tool):
            print(f"FAIL: {tool} is missing: run scripts/install-deps.sh (chromium chromium-driver)")
            return 1

    os.makedirs(a.out, exist_ok=True)
    root = os.path.abspath(a.out)
    state_root = os.path.join(root, "state")
    seed = f"/run/sparkctl-sim/{NAME}/cluster.yaml"
    flags = f"-c {seed} --state-root {state_root}"
    sc = a.sparkctl
    model = os.path.join(root, "model")
    if not os.path.exists(os.path.join(model, "config.json")):
        sh(f"python3 {a.make_model} {model}", check=True)
    profile = os.path.join(root, "profile.yaml")
    with open(profile, "w") as f:
        f.write(
            "schema: sparkctl-profile/v1\nname: dashboard-e2e\nmodel:\n"
            "  repository: sparkctl/qwen3-tiny-demo\n"
            "  revision: 0000000000000000000000000000000000000001\n"
            f"  path: {model}\n  served_name: dash-e2e\ntopology:\n  kind: ring\n  nodes: 4\n"
            "host:\n  kernel:\n    allow: [6.17.0-1031-nvidia, 6.17.0-1032-nvidia]\n"
            "  min_cma_mib: 64\n  memlock: \"8192\"\n  min_free_memory_gib: 0.5\n"
            "engine:\n  backend: cpu\n  tp: 4\n  context_length: 1024\n  chunked_prefill: 256\n"
            "  max_running_requests: 4\n  kv_cache:\n    dtype: fp32\n    tokens: 4096\n"
            f"api:\n  port: {PORT}\n  bind: 127.0.0.1\n")

    fails = Failures()
    dashboard = load = driver = None
    sh(f"{sc} sim destroy --name {NAME}")
    try:
        sh(f"{sc} sim create --name {NAME} --nodes 4 --topology ring", check=True)
        sh(f"{sc} discover -c {seed}", check=True)
        up = sh(f"{sc} up {flags} -p {profile} --yes --json --timeout 240 --engine {a.engine}")
        if up.returncode != 0:
            raise AssertionError(f"sparkctl up failed:\n{up.stdout}\n{up.stderr}")

        dashboard = subprocess.Popen(
            [sc, "dashboard", *flags.split(), "--port", "0", "--preflight-every", "10", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        text = ""
        while True:
            line = dashboard.stdout.readline()
            if not line:
                raise AssertionError("sparkctl dashboard exited: " + dashboard.stderr.read())
            text += line
            if line.startswith("}"):
                break
        url = json.loads(text)["url"]
        print("dashboard at", url, flush=True)

        options = webdriver.ChromeOptions()
        options.binary_location = shutil.which("chromium")
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                    "--window-size=1500,1400", "--disable-gpu", "--no-proxy-server"):
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
        driver.get(url)

        def js(script):
            return driver.execute_script(script)

        nodes = wait(lambda: js("return [...document.querySelectorAll('#nodes tbody tr')]"
                                ".map(r => r.dataset.node)") if js(
            "return document.querySelectorAll('#nodes tbody tr').length") == 4 else None, 15)
        fails.check(sorted(nodes or []) == [f"spark-{i}" for i in range(4)],
                    f"the page shows all four nodes: {nodes}")
        health = wait(lambda: js("return document.getElementById('health').textContent") == "ready",
                      15)
        fails.check(bool(health), "the page shows the model ready")
        fails.check(js("return document.getElementById('link').textContent") == "live",
                    "the event stream is live")

        # The same moment: the page's tick, then status --json, then the page again; MemAvailable
        # and phases must agree with status when the page did not tick in between (else retry).
        for attempt in range(5):
            t0 = js("return document.body.dataset.time")
            status = first_json(sh(f"{sc} status --json {flags}").stdout)
            page_mem = js("return Object.fromEntries([...document.querySelectorAll('#nodes tbody tr')]"
                          ".map(r => [r.dataset.node, Number(r.querySelector('[data-field=mem_available]')"
                          ".dataset.kib)]))")
            page_phase = js("return Object.fromEntries([...document.querySelectorAll('#ranks tbody tr')]"
                            ".map(r => [r.dataset.rank, r.dataset.phase]))")
            if js("return document.body.dataset.time") == t0:
                break
        status_mem = {n["node"]: n["mem_available_kib"] for n in status.get("nodes", [])}
        status_phase = {str(r["rank"]): r["phase"] for r in status.get("ranks", [])}
        fails.check(page_mem == status_mem and len(page_mem) == 4,
                    f"MemAvailable on the page equals status --json: {page_mem} vs {status_mem}")
        fails.check(page_phase == status_phase and len(page_phase) == 4,
                    f"rank phases on the page equal status --json: {page_phase} vs {status_phase}")

        # A load: completions in a loop on rank 0's node (the endpoint binds loopback there).
        body = json.dumps({"model": "dash-e2e", "prompt": "Tell me about the Spark cluster",
                           "max_tokens": 48, "ignore_eos": True})
        load = subprocess.Popen(
            [sc, "sim", "exec", "--name", NAME, "spark-0", "--", "bash", "-c",
             f"for i in $(seq 1 200); do curl -s -o /dev/null -H 'Content-Type: application/json' "
             f"-d '{body}' http://127.0.0.1:{PORT}/v1/completions & curl -s -o /dev/null "
             f"-H 'Content-Type: application/json' -d '{body}' http://127.0.0.1:{PORT}/v1/completions; "
             f"wait; done"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        steps0 = js("return document.querySelector('#ranks tr[data-rank=\"0\"] [data-field=steps]')"
                    ".textContent")
        moved = wait(lambda: js("return document.querySelector('#ranks tr[data-rank=\"0\"] "
                                "[data-field=steps]').textContent") != steps0, 20)
        fails.check(bool(moved), "rank 0's step count moves on the page while the load runs")
        tps = wait(lambda: (lambda v: v if v not in ("n/a", "0.0", "-") else None)(
            js("return document.querySelector('#endpoint [data-field=gen_tps]').textContent")), 20)
        fails.check(bool(tps), f"the page shows generation tok/s under load: {tps}")
        time.sleep(3)  # a few points on the charts
        driver.save_screenshot(os.path.join(root, "dashboard.png"))

        # Kill rank 2: marked on the page within the monitor's window (5 s) plus one tick.
        t_kill = time.time()
        sh(f"{sc} sim fault --name {NAME} kill spark-2 spark-engine", check=True)
        marked = wait(lambda: js("return [...document.querySelectorAll('#events li')].map(l => "
                                 "l.textContent).find(t => /rank 2 \\(spark-2\\) ready -> "
                                 "(exited|hung|failed|stopped)/.test(t)) || null"), 8, 0.1)
        seen = time.time() - t_kill
        fails.check(bool(marked) and seen <= 6.0,
                    f"the killed rank is marked within 6 s ({seen:.1f} s): {marked}")
        driver.save_screenshot(os.path.join(root, "dashboard-degraded.png"))
        row = js("return document.querySelector('#ranks tr[data-rank=\"2\"]').dataset.phase")
        print("rank 2 row now:", row, flush=True)
        restarted = wait(lambda: js("return [...document.querySelectorAll('#events li')].some(l => "
                                    "/restart/.test(l.className))"), 60, 0.5)
        fails.check(bool(restarted), "the monitor's restart shows in the event log")

        # A preflight finding: spark-1's CMA gone is logged by the next preflight pass (every
        # 10 s here), with the fix; undone, it is logged as passing again.
        sh(f"{sc} sim fault --name {NAME} cma spark-1 0", check=True)
        cma = wait(lambda: js("return [...document.querySelectorAll('#events li')].map(l => "
                              "l.textContent).find(t => /preflight CMA.NONZERO fail on spark-1/"
                              ".test(t)) || null"), 30, 0.5)
        fails.check(bool(cma), f"a preflight finding shows in the event log: {cma}")
        sh(f"{sc} sim fault --name {NAME} cma spark-1 default", check=True)
        again = wait(lambda: js("return [...document.querySelectorAll('#events li')].some(l => "
                                "/preflight CMA.NONZERO ok again on spark-1/.test(l.textContent))"),
                     30, 0.5)
        fails.check(bool(again), "the cleared finding shows as passing again")

        severe = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        fails.check(not severe, f"no console errors: {severe}")
    except AssertionError as e:
        fails.check(False, str(e))
    finally:
        if load:
            load.kill()
        if driver:
            driver.quit()
        if dashboard:
            dashboard.terminate()
            try:
                dashboard.wait(10)
            except subprocess.TimeoutExpired:
                dashboard.kill()
        sh(f"{sc} down {flags}")
        sh(f"{sc} sim destroy --name {NAME}")
        shutil.rmtree(state_root, ignore_errors=True)
    if fails.items:
        print(f"{len(fails.items)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
