#!/usr/bin/env python3
"""lm-eval (`local-completions`, local task files: multiple choice, loglikelihood_rolling,
generate_until) against an endpoint `sparkctl up` brought up, run on the node that serves it; every
log-likelihood lm-eval reports must equal the sum of the endpoint's own prompt scores
(tests/engine/server/serve_scoring_test.py holds the tasks and the checks). Exits 77 when lm-eval
is not installed.

    lm_eval_client.py --port 8000 --model up-e2e --tokenizer MODEL_DIR
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "engine",
                                "server"))
import serve_scoring_test as scoring  # noqa: E402

try:
    import lm_eval  # noqa: F401
    import transformers  # noqa: F401
except ImportError as e:
    print(f"SKIPPED: {e} (scripts/install-test-python.sh installs lm-eval)")
    sys.exit(77)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokenizer", required=True, help="directory with the model's tokenizer files")
    a = ap.parse_args()
    scoring.MODEL = a.model
    scoring.lm_eval_checks(a.port, a.tokenizer, tempfile.mkdtemp())
    print(f"{len(scoring.failures)} failure(s)" if scoring.failures else "all ok")
    return 1 if scoring.failures else 0


if __name__ == "__main__":
    sys.exit(main())
