#!/usr/bin/env python3
"""One chat completion through the official `openai` client: the check that `sparkctl up` gave a
working OpenAI-compatible endpoint. Prints the reply; exits 77 when `openai` is not installed.

    chat_client.py --base-url http://127.0.0.1:8000/v1 --model qwen3-tiny-demo [--api-key-file F]
        [--cacert PEM]   (an https:// endpoint whose certificate the client pins)
"""
import argparse
import ssl
import sys

try:
    import openai
except ImportError:
    print("SKIPPED: the `openai` Python package is missing (scripts/install-test-python.sh)")
    sys.exit(77)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--api-key-file")
    ap.add_argument("--cacert")
    ap.add_argument("--prompt", default="Hello from a simulated Spark cluster")
    a = ap.parse_args()
    key = "none"
    if a.api_key_file:
        with open(a.api_key_file) as f:
            key = f.readline().strip()
    http = None
    if a.cacert:
        http = openai.DefaultHttpxClient(verify=ssl.create_default_context(cafile=a.cacert))
    client = openai.OpenAI(base_url=a.base_url, api_key=key, timeout=60, http_client=http)
    r = client.chat.completions.create(
        model=a.model, messages=[{"role": "user", "content": a.prompt}],
        max_tokens=8, temperature=0)
    choice = r.choices[0]
    if r.model != a.model or choice.message.role != "assistant" or r.usage.completion_tokens < 1:
        print(f"unexpected reply: {r}")
        return 1
    print(f"reply ({r.usage.completion_tokens} tokens): {choice.message.content!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
