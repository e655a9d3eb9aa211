#!/usr/bin/env python3
"""`spark-engine serve` through the clients coding agents use: the official `anthropic` SDK on
/v1/messages (as Claude Code talks to a server behind ANTHROPIC_BASE_URL, key in x-api-key) and
the official `openai` SDK on /v1/responses, on the random-weight Qwen3 demo checkpoint
(scripts/make_demo_model.py).

Random weights write gibberish, so the checks are about the contract: object and event shapes,
stop reasons, usage, and forced tool calls and text.format, whose output a grammar makes follow
the schema whatever the model prefers. Exits 77 (skipped) without the SDKs.

    serve_client_apis_test.py --engine build/bin/spark-engine
        --tokenizer ../shared/data/tokenizers/qwen3 --make-model scripts/make_demo_model.py
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile

try:
    import anthropic
    import openai
except ImportError:
    print("SKIPPED: the `anthropic` or `openai` Python package is missing "
          "(scripts/install-test-python.sh)")
    sys.exit(77)

KEY = "sk-client-apis-0123456789abcdef"
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


SCHEMA = {"type": "object", "additionalProperties": False, "required": ["city", "days"],
          "properties": {"city": {"type": "string", "maxLength": 20},
                         "days": {"type": "integer", "minimum": 1, "maximum": 14}}}


def follows_schema(doc):
    return (isinstance(doc, dict) and set(doc) == {"city", "days"} and
            isinstance(doc["city"], str) and len(doc["city"]) <= 20 and
            isinstance(doc["days"], int) and 1 <= doc["days"] <= 14)


def anthropic_checks(port):
    c = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key=KEY, max_retries=0,
                            timeout=300)
    msg = c.messages.create(model="demo", max_tokens=8, system="You are terse.",
                            messages=[{"role": "user", "content": "Say hello."}])
    check(msg.type == "message" and msg.role == "assistant" and msg.id.startswith("msg_") and
          msg.stop_reason == "max_tokens" and msg.usage.output_tokens == 8 and
          msg.usage.input_tokens > 5 and [b.type for b in msg.content] == ["text"],
          f"messages.create: {msg.stop_reason} {msg.usage} {[b.type for b in msg.content]}")
    count = c.messages.count_tokens(model="demo", system="You are terse.",
                                    messages=[{"role": "user", "content": "Say hello."}])
    check(count.input_tokens == msg.usage.input_tokens + (msg.usage.cache_read_input_tokens or 0),
          f"count_tokens {count.input_tokens} = the prompt of create ({msg.usage})")

    # Streaming through the SDK's helper, which checks the event sequence as it accumulates.
    names = []
    with c.messages.stream(model="demo", max_tokens=12,
                           messages=[{"role": "user", "content": "Count."}]) as s:
        for event in s:
            names.append(event.type)
        final = s.get_final_message()
    check(names[0] == "message_start" and names[-1] == "message_stop" and
          "content_block_start" in names and "message_delta" in names and
          final.stop_reason == "max_tokens" and final.usage.output_tokens == 12 and
          final.content and final.content[0].type == "text",
          f"messages.stream: {sorted(set(names))}, {final.stop_reason}, {final.usage}")

    # A forced tool call: the grammar writes input that follows input_schema.
    tools = [{"name": "plan_trip", "description": "Plan a trip.", "input_schema": SCHEMA}]
    messages = [{"role": "user", "content": "Plan a trip."}]
    msg = c.messages.create(model="demo", max_tokens=200, tools=tools, messages=messages,
                            tool_choice={"type": "tool", "name": "plan_trip"})
    uses = [b for b in msg.content if b.type == "tool_use"]
    check(msg.stop_reason == "tool_use" and len(uses) == 1 and uses[0].name == "plan_trip" and
          follows_schema(uses[0].input) and uses[0].id.startswith("toolu_"),
          f"forced tool_use follows input_schema: {msg.stop_reason} {msg.content}")
    if uses:
        messages += [{"role": "assistant", "content": msg.content},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id,
                                                   "content": "Booked."}]}]
        msg = c.messages.create(model="demo", max_tokens=6, tools=tools, messages=messages,
                                tool_choice={"type": "none"})
        check(msg.stop_reason in ("max_tokens", "end_turn") and msg.content and
              msg.content[0].type == "text",
              f"tool_result turn answered: {msg.stop_reason} {msg.content}")
    # Streaming a forced call: the input arrives as input_json_delta and parses whole.
    with c.messages.stream(model="demo", max_tokens=200, tools=tools,
                           messages=[{"role": "user", "content": "Plan."}],
                           tool_choice={"type": "any"}) as s:
        final = s.get_final_message()
    uses = [b for b in final.content if b.type == "tool_use"]
    check(final.stop_reason == "tool_use" and len(uses) == 1 and follows_schema(uses[0].input),
          f"streamed forced tool_use: {final.stop_reason} {final.content}")

    try:
        c.messages.create(model="demo", max_tokens=4, messages=messages[:1],
                          extra_body={"frobnicate": 1})
        check(False, "an unknown field is refused")
    except anthropic.BadRequestError as e:
        body = e.body if isinstance(e.body, dict) else {}
        check(body.get("type") == "error" and
              body.get("error", {}).get("type") == "invalid_request_error" and
              "frobnicate" in body.get("error", {}).get("message", ""),
              f"unknown field refused by name in Anthropic's error shape: {e.body}")
    try:
        c.messages.create(model="demo", max_tokens=4, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "iVBORw0KGgo="}}]}])
        check(False, "an image block is refused")
    except anthropic.BadRequestError as e:
        check("image" in str(e.body), f"image block refused by name: {e.body}")
    bad = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="sk-wrong-key-000000000",
                              max_retries=0)
    try:
        bad.messages.create(model="demo", max_tokens=4, messages=messages[:1])
        check(False, "a wrong x-api-key is refused")
    except anthropic.AuthenticationError as e:
        check(e.status_code == 401, f"wrong x-api-key: 401 authentication_error: {e.body}")


def responses_checks(port):
    c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=0,
                      timeout=300)
    r = c.responses.create(model="demo", input="Say hello.", instructions="Be terse.",
                           max_output_tokens=8, store=False)
    check(r.object == "response" and r.status == "incomplete" and
          r.incomplete_details.reason == "max_output_tokens" and r.usage.output_tokens == 8 and
          isinstance(r.output_text, str) and r.output[0].type == "message",
          f"responses.create: {r.status} {r.usage}")
    types = []
    final = None
    for event in c.responses.create(model="demo", input="Count.", max_output_tokens=10,
                                    stream=True):
        types.append(event.type)
        if event.type in ("response.completed", "response.incomplete"):
            final = event.response
    check(types[0] == "response.created" and "response.output_text.delta" in types and
          types[-1] == "response.incomplete" and final is not None and
          final.usage.output_tokens == 10,
          f"responses stream: {sorted(set(types))}")
    # The SDK's accumulating stream helper (it wants response.completed: a schema-bound reply
    # ends, where random weights would otherwise run to max_output_tokens).
    fmt = {"format": {"type": "json_schema", "name": "trip", "schema": SCHEMA, "strict": True}}
    with c.responses.stream(model="demo", input="Plan.", max_output_tokens=300, text=fmt) as s:
        for _ in s:
            pass
        acc = s.get_final_response()
    check(acc.status == "completed" and acc.output and acc.output[0].type == "message" and
          follows_schema(json.loads(acc.output_text)) and acc.usage.output_tokens > 0,
          f"responses.stream helper accumulates: {acc.output_text!r} {acc.usage}")

    tools = [{"type": "function", "name": "plan_trip", "description": "Plan a trip.",
              "parameters": SCHEMA, "strict": True}]
    r = c.responses.create(model="demo", input="Plan a trip.", tools=tools,
                           tool_choice={"type": "function", "name": "plan_trip"},
                           max_output_tokens=200)
    calls = [o for o in r.output if o.type == "function_call"]
    args = json.loads(calls[0].arguments) if calls else None
    check(len(calls) == 1 and calls[0].name == "plan_trip" and follows_schema(args),
          f"forced function_call follows the parameters: {args}")
    if calls:
        r = c.responses.create(
            model="demo", tools=tools, tool_choice="none", max_output_tokens=6,
            input=[{"role": "user", "content": "Plan a trip."},
                   {"type": "function_call", "call_id": calls[0].call_id, "name": "plan_trip",
                    "arguments": calls[0].arguments},
                   {"type": "function_call_output", "call_id": calls[0].call_id,
                    "output": "Booked."}])
        check(r.output and r.output[0].type == "message",
              f"function_call_output turn answered: {r.output}")
    deltas = []
    for event in c.responses.create(model="demo", input="Plan.", tools=tools,
                                    tool_choice="required", max_output_tokens=200, stream=True):
        if event.type == "response.function_call_arguments.delta":
            deltas.append(event.delta)
    check(deltas and follows_schema(json.loads("".join(deltas))),
          f"streamed function_call_arguments.delta: {''.join(deltas)!r}")
    r = c.responses.create(
        model="demo", input="Plan a trip as JSON.", max_output_tokens=300,
        text={"format": {"type": "json_schema", "name": "trip", "schema": SCHEMA, "strict": True}})
    doc = json.loads(r.output_text) if r.status == "completed" else None
    check(follows_schema(doc), f"text.format json_schema: {r.output_text!r}")
    try:
        c.responses.create(model="demo", input="x", previous_response_id="resp_123")
        check(False, "previous_response_id is refused")
    except openai.BadRequestError as e:
        check(e.body.get("param") == "previous_response_id",
              f"previous_response_id refused by name: {e.body}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", required=True)
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
    keys = os.path.join(tmp, "keys")
    with open(keys, "w") as f:
        f.write(KEY + "\n")
    proc = subprocess.Popen([a.engine, "serve", "--model", model, "--port", "0",
                             "--served-model-name", "demo", "--threads", "2",
                             "--api-key-file", keys], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline().rsplit(":", 1)[1])
        anthropic_checks(port)
        responses_checks(port)
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(60)
    check(rc == 0, f"serve exits 0 after SIGTERM (got {rc})")
    print(f"{len(failures)} failure(s)" if failures else "all ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
