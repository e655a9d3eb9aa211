#!/usr/bin/env bash
# Python packages that tests use as real clients: `openai` for the OpenAI server tests,
# `anthropic` for the Anthropic Messages API tests, and
# `huggingface_hub` (its `hf` CLI) for `weights fetch` against the fake hub
# (tests/sparkctl/weights/fake_hf_hub.py), and `selenium` for the dashboard's browser test
# (tests/sparkctl/dashboard). huggingface_hub is pinned: the fake hub serves the
# endpoints and headers this version calls. lm-eval (with transformers for its Hugging Face
# tokenizer) runs against `spark-engine serve` in engine_server_scoring_e2e_test; it is pinned
# (the test reads its sample logs) and since 0.4.10 needs no torch: about 0.9 GB installed
# (datasets, pyarrow, pandas, scikit-learn), no CUDA wheels. Tests that need a missing package
# report themselves skipped, and scripts/check_skips.py fails CI for such a skip.
set -uo pipefail
packages=(openai anthropic "huggingface_hub==2.4.0" "lm-eval[api]==0.4.13" transformers selenium)
python3 -m pip install --quiet "${packages[@]}" 2>/dev/null ||
  python3 -m pip install --quiet --break-system-packages "${packages[@]}" ||
  echo "install-test-python: could not install ${packages[*]}; their tests will be skipped" >&2
