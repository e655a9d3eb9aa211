#!/usr/bin/env bash
# Python packages that tests use as real clients (the `openai` package for the OpenAI server
# test). Tests that need a missing package report themselves skipped, not passed.
set -uo pipefail
python3 -m pip install --quiet openai 2>/dev/null ||
  python3 -m pip install --quiet --break-system-packages openai ||
  echo "install-test-python: could not install the openai package; its tests will be skipped" >&2
