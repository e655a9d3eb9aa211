#!/usr/bin/env python3
"""Prompt scoring on `spark-engine serve` (random-weight Qwen3 demo checkpoint with the real
vocabulary, scripts/make_demo_model.py), then lm-eval itself against it.

The endpoint's contract, as vLLM serves it: /v1/completions with echo + logprobs covers every
prompt token (the first null) and then the generated ones, max_tokens 0 scores only, prompts as
token-id lists (single and batched), prompt_logprobs on completions and chat,
return_tokens_as_token_ids. Scores must not depend on how the prompt was run: a prompt scored in
small chunks, one whose prefix is cached, and the decode path's logprob of a generated token
agree. Then lm-eval (`local-completions`, tasks from local JSON files, no hub access) runs
loglikelihood, loglikelihood_rolling and generate_until tasks, and its per-sample
log-likelihoods must equal the sums of our own scores.

Exits 77 (skipped) without lm-eval (scripts/install-test-python.sh).

    serve_scoring_test.py --engine build/bin/spark-engine --tokenizer ../shared/data/tokenizers/qwen3
        --make-model scripts/make_demo_model.py
"""
import argparse
import glob
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

failures = []
TOL = 1e-4  # absolute, on log-probabilities of a float32 model
MODEL = "demo"  # the served model name (--served-model-name)


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def tokenize(port, text):
    return post(port, "/tokenize", {"prompt": text, "add_special_tokens": False})[1]["tokens"]


def score(port, ids, top=1):
    """Our own scores of a token-id prompt: [None, lp(ids[1]), ...]."""
    status, r = post(port, "/v1/completions", {"model": MODEL, "prompt": ids, "max_tokens": 0,
                                                "echo": True, "logprobs": top})
    assert status == 200, r
    return r["choices"][0]["logprobs"]["token_logprobs"]


def close(a, b, tol=TOL):
    return len(a) == len(b) and all(
        (x is None and y is None) or (x is not None and y is not None and abs(x - y) <= tol)
        for x, y in zip(a, b))


def contract_checks(port, chunked_port):
    text = "The quick brown fox jumps over the lazy dog, again and again."
    ids = tokenize(port, text)
    status, r = post(port, "/v1/completions", {"model": MODEL, "prompt": text, "max_tokens": 0,
                                               "echo": True, "logprobs": 2})
    c = r["choices"][0] if status == 200 else {}
    lp = c.get("logprobs") or {}
    n = len(ids)
    check(status == 200 and c["text"] == text and len(lp["tokens"]) == n and
          lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None and
          all(isinstance(x, float) and x <= 0 for x in lp["token_logprobs"][1:]) and
          r["usage"]["completion_tokens"] == 0 and c["finish_reason"] == "length",
          f"echo + logprobs + max_tokens 0 scores all {n} prompt tokens, generates none")
    offsets = lp.get("text_offset", [])
    check(offsets[:1] == [0] and all(b >= a for a, b in zip(offsets, offsets[1:])) and
          "".join(lp.get("tokens", [])) == text,
          f"text_offset counts on through the prompt: {offsets[:6]}...")
    check(all(tok in top and abs(top[tok] - x) < 1e-6 and len(top) <= 3
              for tok, top, x in zip(lp["tokens"][1:], lp["top_logprobs"][1:],
                                     lp["token_logprobs"][1:])),
          "each prompt position's top_logprobs holds the 2 best and the prompt's own token")
    status, g = post(port, "/v1/completions", {"model": MODEL, "prompt": ids, "max_tokens": 3,
                                               "echo": True, "logprobs": 1, "temperature": 0,
                                               "ignore_eos": True})
    glp = g["choices"][0]["logprobs"] if status == 200 else {}
    check(status == 200 and len(glp["tokens"]) == n + 3 and
          close(glp["token_logprobs"][:n], lp["token_logprobs"]) and
          g["choices"][0]["text"].startswith(text),
          "echo with generation: prompt entries, then the 3 generated ones")
    # The decode path's logprob of the generated tokens equals their score as a prompt.
    gen_ids = [int(t.split(":")[1]) for t in post(
        port, "/v1/completions", {"model": MODEL, "prompt": ids, "max_tokens": 3, "logprobs": 1,
                                  "temperature": 0, "ignore_eos": True,
                                  "return_tokens_as_token_ids": True})[1]["choices"][0]
        ["logprobs"]["tokens"]]
    rescored = score(port, ids + gen_ids)
    check(close(rescored[n:], glp["token_logprobs"][n:]),
          f"generated tokens rescored as a prompt: {rescored[n:]} vs {glp['token_logprobs'][n:]}")
    # Chunked prefill (16-token chunks) and a cached prefix give the same scores.
    long_ids = (ids * 6)[:70]
    one = score(port, long_ids)
    chunked = score(chunked_port, long_ids)
    again = score(chunked_port, long_ids)
    check(close(one, chunked) and close(chunked, again),
          "scores equal with chunked prefill and with the prefix already cached")
    status, b = post(port, "/v1/completions", {"model": MODEL, "prompt": [ids, ids[:5]],
                                               "max_tokens": 1, "echo": True, "logprobs": 0,
                                               "n": 2, "temperature": 0})
    ch = b.get("choices", [])
    check(status == 200 and len(ch) == 4 and [x["index"] for x in ch] == [0, 1, 2, 3] and
          len(ch[2]["logprobs"]["tokens"]) == 6 and ch[0]["text"].startswith(text) and
          b["usage"]["prompt_tokens"] == n + 5 and
          close(ch[0]["logprobs"]["token_logprobs"][:n], lp["token_logprobs"]),
          f"a batch of token-id prompts with n=2: {status} {len(ch)} choices")
    status, p = post(port, "/v1/completions", {"model": MODEL, "prompt": text, "max_tokens": 1,
                                               "prompt_logprobs": 1})
    pl = p["choices"][0].get("prompt_logprobs") if status == 200 else None
    check(status == 200 and pl is not None and len(pl) == n and pl[0] is None and
          all(str(t) in e for t, e in zip(ids[1:], pl[1:])) and
          close([None] + [e[str(t)]["logprob"] for t, e in zip(ids[1:], pl[1:])],
                lp["token_logprobs"]) and
          all(e[str(t)]["rank"] >= 1 for t, e in zip(ids[1:], pl[1:])) and
          p["choices"][0]["logprobs"] is None,
          "completions prompt_logprobs (vLLM's shape: token id -> logprob, rank, decoded_token)")
    status, cr = post(port, "/v1/chat/completions", {
        "model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1,
        "prompt_logprobs": 0, "chat_template_kwargs": {"enable_thinking": False}})
    cpl = cr.get("prompt_logprobs") if status == 200 else None
    check(status == 200 and isinstance(cpl, list) and cpl[0] is None and len(cpl) > 3 and
          all(len(e) == 1 for e in cpl[1:]),
          f"chat prompt_logprobs on the response ({len(cpl or [])} positions)")
    status, t = post(port, "/v1/completions", {"model": MODEL, "prompt": ids[:4], "max_tokens": 0,
                                               "echo": True, "logprobs": 1,
                                               "return_tokens_as_token_ids": True})
    toks = t["choices"][0]["logprobs"]["tokens"] if status == 200 else []
    check(toks == [f"token_id:{i}" for i in ids[:4]], f"return_tokens_as_token_ids: {toks}")
    for body, param in (({"prompt": "x", "max_tokens": 0}, "max_tokens"),
                        ({"prompt": "x", "prompt_logprobs": 1, "stream": True},
                         "prompt_logprobs"),
                        ({"prompt": "x", "prompt_logprobs": 21}, "prompt_logprobs")):
        status, e = post(port, "/v1/completions", {"model": MODEL, **body})
        check(status == 400 and e["error"]["param"] == param,
              f"refused by name: {body} -> {e.get('error', {}).get('message')}")


TASKS = {
    "spark_mc": """task: spark_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}/mc.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: acc
""",
    "spark_rolling": """task: spark_rolling
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}/text.jsonl
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
metric_list:
  - metric: word_perplexity
  - metric: byte_perplexity
  - metric: bits_per_byte
""",
    "spark_gen": """task: spark_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}/gen.jsonl
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 8
  do_sample: false
metric_list:
  - metric: exact_match
""",
}


def write_tasks(tmp):
    data = os.path.join(tmp, "tasks")
    os.makedirs(data)
    mc = [{"question": "Which is a colour?", "choices": [" red", " seven", " Tuesday"],
           "answer": 0},
          {"question": "Two plus two is", "choices": [" four", " blue"], "answer": 0},
          {"question": "The capital of France is", "choices": [" Paris", " Rome", " a fish"],
           "answer": 0}]
    text = [{"text": "Sparks are small machines. Four of them make one server for a large "
                     "model, joined by cables in a ring."},
            {"text": "Perplexity is the exponential of the mean negative log-likelihood."}]
    gen = [{"question": "Q: Say hello.\nA:", "answer": " hello"},
           {"question": "Q: Count to three.\nA:", "answer": " 1 2 3"}]
    for name, rows in (("mc", mc), ("text", text), ("gen", gen)):
        with open(os.path.join(data, name + ".jsonl"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    for name, body in TASKS.items():
        with open(os.path.join(data, name + ".yaml"), "w") as f:
            f.write(body.format(data=data))
    return data


def lm_eval_checks(port, model_dir, tmp):
    tasks = write_tasks(tmp)
    out = os.path.join(tmp, "lm-eval-out")
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", HF_HOME=os.path.join(tmp, "hf-home"),
               TOKENIZERS_PARALLELISM="false")
    args = [sys.executable, "-m", "lm_eval", "--model", "local-completions", "--model_args",
            f"model={MODEL},base_url=http://127.0.0.1:{port}/v1/completions,"
            f"tokenizer={model_dir},tokenizer_backend=huggingface,num_concurrent=1,"
            "max_retries=1",
            "--tasks", "spark_mc,spark_rolling,spark_gen", "--include_path", tasks,
            "--output_path", out, "--log_samples", "--batch_size", "2"]
    r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)
    check(r.returncode == 0, f"lm_eval exits 0: {r.returncode}\n{r.stdout[-1500:]}{r.stderr[-3000:]}")
    if r.returncode != 0:
        return
    samples = {}
    for path in glob.glob(os.path.join(out, "**", "samples_*.jsonl"), recursive=True):
        task = os.path.basename(path).split("_", 1)[1].rsplit("_", 1)[0]
        samples[task] = [json.loads(line) for line in open(path)]
    check(set(samples) == {"spark_mc", "spark_rolling", "spark_gen"},
          f"lm-eval logged samples of the three tasks: {sorted(samples)}")
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model_dir)
    worst, count = 0.0, 0
    for s in samples.get("spark_mc", []):
        for i, resp in enumerate(s["resps"]):
            args = s["arguments"][f"gen_args_{i}"]
            context, continuation = args["arg_0"], args["arg_1"]
            # lm-eval's split: the context's tokens, then the rest of the whole string's.
            ctx_ids = tok(context, add_special_tokens=False)["input_ids"]
            whole = tok(context + continuation, add_special_tokens=False)["input_ids"]
            ours = score(port, whole)
            ll = sum(ours[len(ctx_ids):])
            worst = max(worst, abs(ll - float(resp[0][0])))
            count += 1
    check(count == 8 and worst <= 1e-3,
          f"lm-eval's multiple-choice log-likelihoods equal our scores ({count} choices, "
          f"max |diff| {worst:.2e})")
    nonzero = [float(resp[0][0]) for s in samples.get("spark_mc", []) for resp in s["resps"]]
    check(all(x < 0 for x in nonzero), "no choice scored 0 (the bug lm-eval met before)")
    worst, count = 0.0, 0
    for s in samples.get("spark_rolling", []):
        text = s["doc"]["text"]
        ids = tok(text, add_special_tokens=False)["input_ids"]
        # lm-eval's rolling windows start with the end-of-text token as the first context.
        ours = score(port, [tok.eos_token_id] + ids)
        ll = sum(ours[1:])
        worst = max(worst, abs(ll - float(s["resps"][0][0])))
        count += 1
    check(count == 2 and worst <= 1e-3,
          f"lm-eval's rolling log-likelihoods equal our scores ({count} texts, max |diff| "
          f"{worst:.2e})")
    gen = samples.get("spark_gen", [])
    check(len(gen) == 2 and all(isinstance(s["resps"][0][0], str) for s in gen),
          f"generate_until returned text for both questions: {[s['resps'] for s in gen]}")
    results = glob.glob(os.path.join(out, "**", "results_*.json"), recursive=True)
    res = json.load(open(results[0]))["results"] if results else {}
    wp = res.get("spark_rolling", {}).get("word_perplexity,none", 1.0)
    check(wp > 1.0 and math.isfinite(wp), f"word perplexity is a real number: {wp}")


def quality_checks(a, port, model, tmp):
    """spark-engine perplexity and sparkctl check --quality against the profile's reference."""
    r = subprocess.run([a.sparkctl, "profile", "show", a.profile, "--json"], capture_output=True,
                       text=True, timeout=60)
    quality = json.loads(r.stdout).get("quality") if r.returncode == 0 else None
    check(quality is not None and quality["perplexity"] > 0,
          f"the demo profile records a quality reference: {quality}")
    if quality is None:
        return
    text = os.path.abspath(os.path.join(os.path.dirname(a.profile), quality["text"]))
    r = subprocess.run([a.engine, "perplexity", "--model", model, "--text", text, "--context",
                        str(quality["context"]), "--threads", "2", "--json"],
                       capture_output=True, text=True, timeout=300)
    doc = json.loads(r.stdout) if r.returncode == 0 else {}
    ref = quality["perplexity"]
    check(doc.get("schema") == "spark-engine-perplexity/v1" and doc.get("windows", 0) > 1 and
          abs(doc["perplexity"] - ref) <= 1e-4 * ref and doc["scored_tokens"] ==
          doc["tokens"] - doc["windows"],
          f"spark-engine perplexity equals transformers' {ref}: {doc or r.stderr[-300:]}")
    url = f"http://127.0.0.1:{port}"

    def run_check(profile):
        r = subprocess.run([a.sparkctl, "check", "--url", url, "--quality", "--profile", profile,
                            "--json"], capture_output=True, text=True, timeout=300)
        doc = json.loads(r.stdout) if r.stdout.strip() else {}
        checks = doc.get("checks", [{}])
        return r.returncode, checks[0] if checks else {}, r.stderr

    rc, c, err = run_check(a.profile)
    check(rc == 0 and c.get("name") == "quality" and c.get("verdict") == "pass",
          f"sparkctl check --quality passes on the served demo model: {rc} {c} {err[-300:]}")
    # Copies in tmp (the text's path made absolute): a wrong reference, and none at all.
    lines = [ln.replace(f"text: {quality['text']}", f"text: {text}")
             for ln in open(a.profile).read().splitlines()]
    bad = os.path.join(tmp, "wrong-quality.yaml")
    none = os.path.join(tmp, "no-quality.yaml")
    with open(bad, "w") as f:
        f.write("\n".join(f"  perplexity: {ref * 1.5:.2f}" if ln.strip().startswith("perplexity:")
                          else ln for ln in lines) + "\n")
    rc, c, err = run_check(bad)
    detail = c.get("detail", "")
    check(rc == 2 and c.get("verdict") == "fail" and f"{ref * 1.5:.2f}".rstrip("0") in detail
          and "reference" in detail, f"a wrong reference fails with both numbers: {rc} {detail}")
    with open(none, "w") as f:
        f.write("\n".join(lines[:next(i for i, ln in enumerate(lines)
                                      if ln.startswith("quality:"))]) + "\n")
    rc, c, err = run_check(none)
    check(rc == 0 and c.get("verdict") == "no reference" and "no quality reference" in
          c.get("detail", ""), f"a profile without a reference says so: {rc} {c}")


def start(engine, model, extra):
    proc = subprocess.Popen([engine, "serve", "--model", model, "--port", "0",
                             "--served-model-name", "demo", "--threads", "2", *extra],
                            stdout=subprocess.PIPE, text=True)
    return proc, int(proc.stdout.readline().rsplit(":", 1)[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--make-model", required=True)
    ap.add_argument("--sparkctl", help="also check sparkctl check --quality with --profile")
    ap.add_argument("--profile", help="the demo profile, whose quality reference is checked")
    ap.add_argument("--no-lm-eval", action="store_true", help="only the endpoint's contract")
    a = ap.parse_args()
    missing = None  # lm-eval missing: the endpoint's checks still run, then the skip
    if not a.no_lm_eval:
        try:
            import lm_eval  # noqa: F401
            import transformers  # noqa: F401
        except ImportError as e:
            missing = f"{e} (scripts/install-test-python.sh installs lm-eval)"
    tmp = tempfile.mkdtemp()
    model = os.path.join(tmp, "demo")
    # The demo checkpoint exactly as `sparkctl up` deploys it (bf16, default seed): the profile's
    # quality reference was computed for it.
    subprocess.run([sys.executable, a.make_model, model, "--tokenizer", a.tokenizer], check=True,
                   stdout=subprocess.DEVNULL)
    for name in ("tokenizer_config.json",):  # lm-eval's HF tokenizer reads it beside the model
        src = os.path.join(a.tokenizer, name)
        if os.path.exists(src) and not os.path.exists(os.path.join(model, name)):
            with open(src) as f, open(os.path.join(model, name), "w") as g:
                g.write(f.read())
    proc, port = start(a.engine, model, [])
    chunked, chunked_port = start(a.engine, model, ["--max-batched-tokens", "16"])
    try:
        contract_checks(port, chunked_port)
        if a.sparkctl and a.profile:
            quality_checks(a, port, model, tmp)
        if not a.no_lm_eval and missing is None:
            lm_eval_checks(port, model, tmp)
    finally:
        rcs = []
        for p in (proc, chunked):
            p.send_signal(signal.SIGTERM)
            rcs.append(p.wait(60))
    check(rcs == [0, 0], f"servers exit 0 after SIGTERM (got {rcs})")
    print(f"{len(failures)} failure(s)" if failures else "all ok")
    if not failures and missing:
        print(f"SKIPPED the lm-eval part: {missing}")
        return 77
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
