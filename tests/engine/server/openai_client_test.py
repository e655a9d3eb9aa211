#!/usr/bin/env python3
"""The official `openai` Python client (and curl) against fake_openai_server.

Run by ctest (engine_server_openai_client_test). Exits 77 (ctest: skipped) when the `openai`
package is not installed: scripts/install-test-python.sh installs it.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

try:
    import openai
except ImportError:
    print("SKIPPED: the `openai` Python package is missing (python3 -m pip install openai)")
    sys.exit(77)

FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def start_server(binary, *args):
    proc = subprocess.Popen([binary, *args], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        proc.kill()
        raise RuntimeError("server did not start: " + line)
    return proc, int(line.split()[-1])


def client(port, key="none"):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key, max_retries=0, timeout=30)


def test_basic(c):
    models = c.models.list()
    check([m.id for m in models.data] == ["fake"], "models.list returns the served model")
    r = c.chat.completions.create(model="fake", messages=[{"role": "user", "content": "hi"}])
    check(r.choices[0].message.content == "Hello! I am a fake model.", "chat: content")
    check(r.choices[0].finish_reason == "stop", "chat: finish_reason stop")
    check(r.usage.completion_tokens > 0 and r.usage.prompt_tokens > 0, "chat: usage")
    stream = c.chat.completions.create(model="fake", messages=[{"role": "user", "content": "hi"}],
                                       stream=True, stream_options={"include_usage": True})
    text, usage, finish = "", None, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for ch in chunk.choices:
            text += ch.delta.content or ""
            finish = ch.finish_reason or finish
    check(text == "Hello! I am a fake model.", "chat stream: content")
    check(finish == "stop" and usage is not None and usage.completion_tokens == r.usage.completion_tokens,
          "chat stream: finish_reason and include_usage")
    r = c.completions.create(model="fake", prompt="say hi", max_tokens=5)
    check(r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 5, "completions: max_tokens")
    text = "".join(ch.choices[0].text for ch in c.completions.create(model="fake", prompt="x", stream=True,
                                                                     max_tokens=100, stop=["fake"]))
    check(text == "Hello! I am a ", "completions stream: stop string")
    r = c.chat.completions.create(model="fake", messages=[{"role": "user", "content": "hi"}], n=2, seed=7,
                                  temperature=0.7, top_p=0.9, logprobs=True, top_logprobs=2,
                                  extra_body={"top_k": 5, "min_p": 0.05})
    check(len(r.choices) == 2 and r.choices[1].logprobs.content[0].logprob < 0, "n and logprobs")


def test_reasoning(c):
    r = c.chat.completions.create(model="fake", messages=[{"role": "user", "content": "think: 2+2?"}],
                                  extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    m = r.choices[0].message
    reasoning = (m.model_extra or {}).get("reasoning_content")
    check(reasoning is not None and "2+2" in reasoning, "reasoning_content split out")
    check(m.content == "\n\nThe answer is 4.", "content after reasoning, its whitespace kept")
    parts, content = [], ""
    for chunk in c.chat.completions.create(model="fake", stream=True,
                                           messages=[{"role": "user", "content": "think: 2+2?"}]):
        for ch in chunk.choices:
            parts.append((ch.delta.model_extra or {}).get("reasoning_content") or "")
            content += ch.delta.content or ""
    check("".join(parts) == reasoning and content == "\n\nThe answer is 4.",
          "reasoning split while streaming")


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def test_tools(c):
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = c.chat.completions.create(model="fake", messages=messages, tools=TOOLS, tool_choice="auto")
    calls = r.choices[0].message.tool_calls or []
    check(r.choices[0].finish_reason == "tool_calls" and len(calls) == 1, "tool call returned")
    check(calls and calls[0].function.name == "get_weather" and
          json.loads(calls[0].function.arguments) == {"city": "Paris"}, "tool call name and arguments")
    messages.append(r.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": calls[0].id, "content": "22 C, sunny"})
    r2 = c.chat.completions.create(model="fake", messages=messages, tools=TOOLS)
    check(r2.choices[0].message.content == "It is 22 degrees in Paris.", "tool result fed back")
    streamed = {}
    for chunk in c.chat.completions.create(model="fake", messages=messages[:1], tools=TOOLS, stream=True):
        for ch in chunk.choices:
            for tc in ch.delta.tool_calls or []:
                entry = streamed.setdefault(tc.index, {"name": "", "arguments": ""})
                entry["name"] += tc.function.name or ""
                entry["arguments"] += tc.function.arguments or ""
    check(streamed.get(0, {}).get("name") == "get_weather" and
          json.loads(streamed[0]["arguments"]) == {"city": "Paris"}, "tool call streamed")
    hello = [{"role": "user", "content": "hello"}]
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        r = c.chat.completions.create(model="fake", messages=hello, tools=TOOLS, tool_choice=choice)
        calls = r.choices[0].message.tool_calls or []
        check(len(calls) == 1 and calls[0].function.name == "get_weather" and
              json.loads(calls[0].function.arguments) == {"city": "Paris"},
              f"tool_choice {choice} forces a call")
    try:
        c.chat.completions.create(model="fake", messages=[{"role": "user", "content": "nocall"}],
                                  tools=TOOLS, tool_choice="required")
        check(False, "a forced call that does not come out raises BadRequestError")
    except openai.BadRequestError as e:
        check("not a valid tool call" in str(e), "a forced call that does not come out raises BadRequestError")


def test_errors(c):
    for kwargs, param in [({"model": "nope"}, "model"), ({"model": "fake", "temperature": 5}, "temperature"),
                          ({"model": "fake", "max_tokens": 10 ** 7}, "max_tokens")]:
        try:
            c.chat.completions.create(messages=[{"role": "user", "content": "hi"}], **kwargs)
            check(False, f"400 for bad {param}")
        except openai.BadRequestError as e:
            check(e.status_code == 400 and e.body.get("param") == param, f"BadRequestError names {param}")


def test_curl_sse(port):
    body = json.dumps({"model": "fake", "messages": [{"role": "user", "content": "hi"}], "stream": True})
    out = subprocess.run(["curl", "-sN", "-H", "Content-Type: application/json", "-d", body,
                          f"http://127.0.0.1:{port}/v1/chat/completions"], capture_output=True, text=True,
                         timeout=30).stdout
    events = out.split("\n\n")
    check(events[-1] == "" and events[-2] == "data: [DONE]", "curl: stream ends with data: [DONE]")
    check(all(e.startswith("data: {") for e in events[:-2]), "curl: every event is one data: line of JSON")
    for e in events[:-2]:
        json.loads(e[len("data: "):])


def test_auth_and_drain(binary, extra):
    with tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False) as f:
        f.write("# keys\nsk-spark-test-key-0123456789\n")
    proc, port = start_server(binary, "--api-key-file", f.name, "--token-delay-ms", "5", *extra)
    try:
        try:
            client(port, "wrong-key-0000000000").models.list()
            check(False, "401 without the right key")
        except openai.AuthenticationError:
            check(True, "AuthenticationError without the right key")
        c = client(port, "sk-spark-test-key-0123456789")
        got = {"text": "", "done": False}

        def reader():
            stream = c.completions.create(model="fake", prompt="a long story", max_tokens=150, stream=True)
            for chunk in stream:
                got["text"] += chunk.choices[0].text if chunk.choices else ""
            got["done"] = True

        t = threading.Thread(target=reader)
        t.start()
        while not got["text"]:
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        t.join(30)
        check(got["done"] and len(got["text"]) > 100, "SIGTERM drains the running stream")
        check(proc.wait(30) == 0, "server exits 0 after draining")
    finally:
        if proc.poll() is None:
            proc.kill()
        os.unlink(f.name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--tokenizer", default="")
    args = ap.parse_args()
    extra = ["--tokenizer", args.tokenizer] if args.tokenizer and os.path.isdir(args.tokenizer) else []
    print("tokenizer:", extra[1] if extra else "bytes")
    proc, port = start_server(args.server, *extra)
    try:
        c = client(port)
        test_basic(c)
        test_reasoning(c)
        test_tools(c)
        test_errors(c)
        test_curl_sse(port)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    test_auth_and_drain(args.server, extra)
    print(f"{len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
