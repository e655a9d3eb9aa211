#!/usr/bin/env bash
# Python packages that tests use as real clients: `openai` for the OpenAI server tests, and
# `huggingface_hub` (its `hf` CLI) for `weights fetch` against the fake hub
# (tests/sparkctl/weights/fake_hf_hub.py), and `selenium` for the dashboard's browser test
# (tests/sparkctl/dashboard). huggingface_hub is pinned: the fake hub serves the
# endpoints and headers this version calls. Tests that need a missing package report themselves
# skipped, and scripts/check_skips.py fails CI for such a skip.
set -uo pipefail
packages=(openai "huggingface_hub==2.4.0" selenium)
python3 -m pip install --quiet "${packages[@]}" 2>/dev/null ||
  python3 -m pip install --quiet --break-system-packages "${packages[@]}" ||
  echo "install-test-python: could not install ${packages[*]}; their tests will be skipped" >&2
