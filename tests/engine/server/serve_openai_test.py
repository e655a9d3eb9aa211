#!/usr/bin/env python3
"""`spark-engine serve` as a new user meets it through the official `openai` client, on a
random-weight Qwen3 demo checkpoint with the real vocabulary (scripts/make_demo_model.py), then
`sparkctl check` and `sparkctl bench serve` against the same server.

Random weights write gibberish, so every check here is about the contract, which structured
output makes testable: replies under a grammar must parse and follow their schema whatever the
model prefers. Exits 77 (skipped) without the `openai` package.

    serve_openai_test.py --engine build/bin/spark-engine --sparkctl build/bin/sparkctl
        --tokenizer ../shared/data/tokenizers/qwen3 --make-model scripts/make_demo_model.py
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

try:
    import openai
    import pydantic
except ImportError:
    print("SKIPPED: the `openai` Python package is missing (scripts/install-test-python.sh)")
    sys.exit(77)

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as r:
        return r.status, json.loads(r.read())


class Person(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=16)
    age: int = pydantic.Field(ge=0, le=120)


def client_checks(c, port):
    off = {"chat_template_kwargs": {"enable_thinking": False}}
    schema = {"type": "object", "additionalProperties": False, "required": ["city", "days"],
              "properties": {"city": {"type": "string", "maxLength": 20},
                             "days": {"type": "integer", "minimum": 1, "maximum": 14}}}
    for seed in (1, 2):
        r = c.chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "Plan a trip as JSON."}],
            max_tokens=300, temperature=1.0, seed=seed, extra_body=off,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "trip", "strict": True, "schema": schema}})
        doc = json.loads(r.choices[0].message.content)
        check(set(doc) == {"city", "days"} and isinstance(doc["days"], int) and
              1 <= doc["days"] <= 14 and len(doc["city"]) <= 20,
              f"json_schema reply follows the schema (seed {seed}): {doc}")
    parse = getattr(c.chat.completions, "parse", None) or c.beta.chat.completions.parse
    parsed = parse(
        model="demo", messages=[{"role": "user", "content": "Invent a person."}],
        response_format=Person, max_tokens=200, temperature=0, extra_body=off)
    p = parsed.choices[0].message.parsed
    check(isinstance(p, Person) and len(p.name) <= 16, f"pydantic parse(): {p}")
    r = c.chat.completions.create(
        model="demo", messages=[{"role": "user", "content": "A code."}], max_tokens=40,
        extra_body={**off, "structured_outputs": {"regex": "[A-Z]{3}-[0-9]{4}"}})
    check(re.fullmatch(r"[A-Z]{3}-[0-9]{4}", r.choices[0].message.content or "") is not None,
          f"structured_outputs.regex: {r.choices[0].message.content!r}")
    r = c.chat.completions.create(
        model="demo", messages=[{"role": "user", "content": "Yes or no?"}], max_tokens=10,
        extra_body={**off, "structured_outputs": {"choice": ["yes", "no"]}})
    check(r.choices[0].message.content in ("yes", "no"), f"choice: {r.choices[0].message.content!r}")
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": schema}}]
    r = c.chat.completions.create(
        model="demo", messages=[{"role": "user", "content": "Weather?"}], tools=tools,
        tool_choice={"type": "function", "function": {"name": "get_weather"}}, max_tokens=200,
        extra_body=off)
    calls = r.choices[0].message.tool_calls or []
    args = json.loads(calls[0].function.arguments) if calls else {}
    check(len(calls) == 1 and calls[0].function.name == "get_weather" and set(args) ==
          {"city", "days"} and r.choices[0].finish_reason == "tool_calls",
          f"named tool call follows the parameters: {args}")
    space = 220  # Qwen3's "Ġ": one space
    r = c.chat.completions.create(model="demo", messages=[{"role": "user", "content": "x"}],
                                  max_tokens=3, temperature=0, logit_bias={str(space): 100},
                                  extra_body=off)
    check(r.choices[0].message.content == "   ",
          f"logit_bias +100 on a space, and the spaces kept: {r.choices[0].message.content!r}")
    box = 151648  # <|box_start|>, a special token
    texts = [c.chat.completions.create(
        model="demo", messages=[{"role": "user", "content": "x"}], max_tokens=2, temperature=0,
        logit_bias={str(box): 100}, extra_body={**off, **extra}).choices[0].message.content
        for extra in ({}, {"skip_special_tokens": False})]
    check(texts == ["", "<|box_start|><|box_start|>"],
          f"skip_special_tokens drops special tokens by default, keeps them when false: {texts}")
    try:
        c.chat.completions.create(model="demo", messages=[{"role": "user", "content": "x"}],
                                  max_tokens=3, extra_body={"frobnicate": 1})
        check(False, "an unknown field is refused")
    except openai.BadRequestError as e:
        check(e.body.get("param") == "frobnicate", f"unknown field refused by name: {e.body}")
    try:
        c.completions.create(model="demo", prompt="x", max_tokens=2, suffix="y")
        check(False, "suffix is refused")
    except openai.BadRequestError as e:
        check(e.body.get("param") == "suffix", f"suffix refused by name: {e.body}")
    try:
        c.chat.completions.create(model="demo", messages=[{"role": "user", "content": "x " * 5000}],
                                  max_tokens=3)
        check(False, "an over-long prompt is refused")
    except openai.BadRequestError as e:
        m = str(e.body.get("message"))
        check("4096" in m and "input tokens" in m, f"context overflow names both numbers: {m}")
    check(c.models.retrieve("demo").id == "demo", "models.retrieve(served name)")
    try:
        c.models.retrieve("nope")
        check(False, "an unknown model id is a 404")
    except openai.NotFoundError:
        check(True, "models.retrieve(unknown) -> NotFoundError")
    status, tok = post(port, "/tokenize", {"prompt": "Hello structured world"})
    status2, detok = post(port, "/detokenize", {"tokens": tok.get("tokens", [])})
    check(status == 200 and status2 == 200 and detok.get("prompt") == "Hello structured world",
          f"/tokenize + /detokenize round trip: {tok} -> {detok}")
    status, version = get(port, "/version")
    check(status == 200 and version.get("build"), f"/version: {version}")
    chunks = list(c.chat.completions.create(
        model="demo", messages=[{"role": "user", "content": "x"}], max_completion_tokens=5,
        stream=True, stream_options={"include_usage": True}, extra_body={**off, "min_tokens": 5}))
    usage = chunks[-1].usage
    check(usage is not None and usage.completion_tokens == 5 and chunks[-1].choices == [],
          f"streaming usage chunk: {usage}")
    a = c.chat.completions.create(model="demo", messages=[{"role": "user", "content": "s"}],
                                  max_tokens=6, n=2, seed=11, temperature=1.0, extra_body=off)
    b = c.chat.completions.create(model="demo", messages=[{"role": "user", "content": "s"}],
                                  max_tokens=6, n=2, seed=11, temperature=1.0, extra_body=off)
    check([x.message.content for x in a.choices] == [x.message.content for x in b.choices],
          "n=2 with a seed repeats")
    r = c.chat.completions.create(model="demo", messages=[{"role": "user", "content": "x"}],
                                  max_tokens=2, reasoning_effort="high")
    check(r.choices[0].finish_reason in ("stop", "length"), "reasoning_effort accepted")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", required=True)
    ap.add_argument("--sparkctl")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--make-model", required=True)
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.tokenizer, "tokenizer.json")):
        print(f"FAIL: no tokenizer in {a.tokenizer}")
        return 1
    tmp = tempfile.mkdtemp()
    model = os.path.join(tmp, "demo")
    subprocess.run([sys.executable, a.make_model, model, "--tokenizer", a.tokenizer, "--dtype",
                    "f32"], check=True, stdout=subprocess.DEVNULL)
    r = subprocess.run([a.engine, "serve", "--model", model, "--port", "0",
                        "--max-model-len", "100000"], capture_output=True, text=True, timeout=120)
    check(r.returncode == 2 and "past the 4096 positions" in r.stderr,
          f"--max-model-len past the checkpoint's positions refused: {r.stderr.strip()[-200:]}")
    proc = subprocess.Popen([a.engine, "serve", "--model", model, "--port", "0",
                             "--served-model-name", "demo", "--threads", "2"],
                            stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline().rsplit(":", 1)[1])
        c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0,
                          timeout=300)
        client_checks(c, port)
        if a.sparkctl:
            url = f"http://127.0.0.1:{port}"
            r = subprocess.run([a.sparkctl, "check", "--url", url, "--random-weights", "--json",
                                "--long-prompt-tokens", "1500", "--concurrency", "4"],
                               capture_output=True, text=True, timeout=900)
            doc = json.loads(r.stdout) if r.stdout.strip() else {}
            verdicts = {x["name"]: x["verdict"] for x in doc.get("checks", [])}
            check(r.returncode == 0 and doc.get("schema") == "sparkctl-check/v1" and
                  verdicts.get("json_schema") == "pass" and verdicts.get("tool_call") == "pass" and
                  verdicts.get("arithmetic") == "not judged (random weights)",
                  f"sparkctl check --random-weights: rc {r.returncode}, {verdicts} {r.stderr[-300:]}")
            out = os.path.join(tmp, "serve.json")
            svg = os.path.join(tmp, "serve.svg")
            r = subprocess.run([a.sparkctl, "bench", "serve", "--url", url, "--concurrency", "1,2",
                                "--context", "64,256", "--output-tokens", "8", "--repeats", "2",
                                "--out", out, "--plot", svg], capture_output=True, text=True,
                               timeout=900)
            doc = json.load(open(out)) if os.path.exists(out) else {}
            cells = doc.get("cells", [])
            exact = all(s["completion_tokens"] == 8 for c_ in cells for rnd in c_["rounds"]
                        for s in rnd)
            check(r.returncode == 0 and len(cells) == 4 and exact and
                  all(len(c_["rounds"]) == 2 for c_ in cells) and
                  open(svg).read().startswith("<svg"),
                  f"sparkctl bench serve: rc {r.returncode}, {len(cells)} cells, exact lengths "
                  f"{exact}\n{r.stdout}{r.stderr[-300:]}")
            r = subprocess.run([a.sparkctl, "bench", "serve", "--url", url, "--concurrency", "1",
                                "--context", "64", "--output-tokens", "4", "--repeats", "1",
                                "--compare", out], capture_output=True, text=True, timeout=300)
            check(r.returncode == 0, f"bench serve --compare with the same build: {r.stderr[-300:]}")
            doc["identity"]["build"] = "0000000000ff"
            other = os.path.join(tmp, "other.json")
            json.dump(doc, open(other, "w"))
            r = subprocess.run([a.sparkctl, "bench", "serve", "--url", url, "--concurrency", "1",
                                "--context", "64", "--repeats", "1", "--compare", other],
                               capture_output=True, text=True, timeout=300)
            check(r.returncode == 2 and "build differs" in r.stderr,
                  f"bench serve refuses to compare another build: {r.stderr.strip()}")
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(60)
    check(rc == 0, f"serve exits 0 after SIGTERM (got {rc})")
    print(f"{len(failures)} failure(s)" if failures else "all ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
