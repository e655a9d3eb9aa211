#!/usr/bin/env python3
"""The official `anthropic` and `openai` clients against fake_openai_server, whose scripted
replies (fake_service.cc) have what random weights never write: a think block, and a tool call
the model chose itself. Checks that the SDKs' own accumulators rebuild thinking blocks and
reasoning items from the stream, and that an automatic tool call and its result round-trip.

Run by ctest (engine_server_client_apis_fake_test). Exits 77 (skipped) without the SDKs.
"""
import argparse
import json
import signal
import subprocess
import sys

try:
    import anthropic
    import openai
except ImportError:
    print("SKIPPED: the `anthropic` or `openai` Python package is missing "
          "(scripts/install-test-python.sh)")
    sys.exit(77)

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


WEATHER = {"name": "get_weather", "description": "Weather in a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                            "required": ["city"]}}
THINK = {"type": "enabled", "budget_tokens": 1024}


def anthropic_checks(port):
    c = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="none", max_retries=0,
                            timeout=30)
    msg = c.messages.create(model="fake", max_tokens=2000, thinking=THINK,
                            messages=[{"role": "user", "content": "think: 2+2?"}])
    types = [b.type for b in msg.content]
    check(types == ["thinking", "text"] and "That is 4." in msg.content[0].thinking and
          "The answer is 4." in msg.content[1].text and msg.stop_reason == "end_turn",
          f"thinking block then text: {msg.content}")
    with c.messages.stream(model="fake", max_tokens=2000, thinking=THINK,
                           messages=[{"role": "user", "content": "think: 2+2?"}]) as s:
        events = [e.type for e in s]
        final = s.get_final_message()
    check([b.type for b in final.content] == ["thinking", "text"] and
          final.content[0].thinking == msg.content[0].thinking and
          final.content[1].text == msg.content[1].text and "thinking" in events,
          f"streamed thinking accumulates to the same blocks: {final.content}")
    # A thinking turn goes back as history, its thinking block included.
    again = c.messages.create(model="fake", max_tokens=2000, thinking=THINK, messages=[
        {"role": "user", "content": "think: 2+2?"}, {"role": "assistant", "content": msg.content},
        {"role": "user", "content": "Thanks. Say hello."}])
    check(again.stop_reason == "end_turn" and again.content,
          f"a thinking turn replayed as history: {again.content}")
    # The model calls a tool on its own (tool_choice auto), then answers from the result.
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    with c.messages.stream(model="fake", max_tokens=500, tools=[WEATHER],
                           messages=messages) as s:
        final = s.get_final_message()
    uses = [b for b in final.content if b.type == "tool_use"]
    check(final.stop_reason == "tool_use" and len(uses) == 1 and
          uses[0].input == {"city": "Paris"},
          f"automatic tool_use streamed: {final.content}")
    if uses:
        messages += [{"role": "assistant", "content": final.content},
                     {"role": "user", "content": [{"type": "tool_result",
                                                   "tool_use_id": uses[0].id, "content": "22 C"}]}]
        msg = c.messages.create(model="fake", max_tokens=500, tools=[WEATHER], messages=messages)
        check(msg.content and msg.content[0].type == "text" and
              msg.content[0].text == "It is 22 degrees in Paris.",
              f"tool_result answered: {msg.content}")


def responses_checks(port):
    c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0,
                      timeout=30)
    r = c.responses.create(model="fake", input="think: 2+2?")
    kinds = [o.type for o in r.output]
    check(kinds == ["reasoning", "message"] and "That is 4." in r.output[0].content[0].text and
          "The answer is 4." in r.output_text and r.status == "completed",
          f"reasoning item then message: {r.output}")
    with c.responses.stream(model="fake", input="think: 2+2?") as s:
        for _ in s:
            pass
        acc = s.get_final_response()
    check([o.type for o in acc.output] == ["reasoning", "message"] and
          acc.output[0].content[0].text == r.output[0].content[0].text and
          acc.output_text == r.output_text,
          f"the stream helper rebuilds the reasoning item: {acc.output}")
    again = c.responses.create(model="fake", input=[
        {"role": "user", "content": "think: 2+2?"}, *r.output,
        {"role": "user", "content": "Thanks. Say hello."}])
    check(again.status == "completed" and again.output_text,
          f"reasoning and message items replayed as input: {again.output_text!r}")
    tools = [{"type": "function", "name": "get_weather", "parameters": WEATHER["input_schema"]}]
    r = c.responses.create(model="fake", input="What is the weather in Paris?", tools=tools)
    calls = [o for o in r.output if o.type == "function_call"]
    check(len(calls) == 1 and json.loads(calls[0].arguments) == {"city": "Paris"},
          f"automatic function_call: {r.output}")
    if calls:
        r = c.responses.create(model="fake", tools=tools, input=[
            {"role": "user", "content": "What is the weather in Paris?"},
            {"type": "function_call", "call_id": calls[0].call_id, "name": "get_weather",
             "arguments": calls[0].arguments},
            {"type": "function_call_output", "call_id": calls[0].call_id, "output": "22 C"}])
        check(r.output_text == "It is 22 degrees in Paris.",
              f"function_call_output answered: {r.output_text!r}")
    # The usual agent loop: the previous response's output items go back as they came.
    first = c.responses.create(model="fake", input="think, then the weather in Paris?",
                               tools=tools)
    outputs = [o for o in first.output if o.type == "function_call"]
    if outputs:
        r = c.responses.create(model="fake", tools=tools, input=[
            {"role": "user", "content": "think, then the weather in Paris?"}, *first.output,
            {"type": "function_call_output", "call_id": outputs[0].call_id, "output": "22 C"}])
    check(outputs and r.output_text == "It is 22 degrees in Paris.",
          f"output items replayed as input: {[o.type for o in first.output]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--tokenizer", required=True)
    a = ap.parse_args()
    proc = subprocess.Popen([a.server, "--tokenizer", a.tokenizer], stdout=subprocess.PIPE,
                            text=True)
    try:
        line = proc.stdout.readline()
        if not line.startswith("listening on "):
            print(f"FAIL: server did not start: {line!r}")
            return 1
        port = int(line.split()[-1])
        anthropic_checks(port)
        responses_checks(port)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    print(f"{len(failures)} failure(s)" if failures else "all ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
