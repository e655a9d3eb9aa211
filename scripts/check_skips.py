#!/usr/bin/env python3
"""Fails when a test was skipped for a reason the machine running CI should satisfy.

Reads the JUnit file of `ctest --output-junit FILE` (scripts/test.sh writes one) and looks at
every skipped case's output for gtest's skip message ("Skipped" followed by the reason). A skip is
accepted only when its reason names something CI's machine does not have (a CUDA device, by
default: --allow adds patterns); any other skip (no root, no network namespaces, ../shared data
not found, sshd or iproute2 missing, ...) is a failure here, because on CI it means a test that
should have run did not. A skipped case without a reason is a failure too.

  scripts/check_skips.py build/ctest-junit.xml [--allow REGEX ...]
Exit status: 0 when every skip is accepted, 1 otherwise, 2 for an unreadable file.
"""
import argparse
import re
import sys
import xml.etree.ElementTree as ET

# What CI's machine lacks by design: GPUs (the gpu label's tests skip there with these reasons).
DEFAULT_ALLOWED = [
    r"no CUDA device",
    r"needs two CUDA devices",
    r"has no peer access to GPU",
    r"block-scaled FP8 GEMMs are Hopper's",
]


def skip_reasons(output):
    """The reason lines after each gtest 'Skipped' marker ("file:line: Skipped" then the text)."""
    lines = output.splitlines()
    reasons = []
    for i, line in enumerate(lines):
        if re.search(r"(^|: )Skipped\s*$", line):
            reasons.append(lines[i + 1].strip() if i + 1 < len(lines) else "")
    return reasons


def check(path, allowed):
    """Returns a list of (test name, reason) for the skips that are not allowed."""
    tree = ET.parse(path)
    bad = []
    for case in tree.iter("testcase"):
        skipped = case.find("skipped") is not None or case.get("status") in ("notrun", "skipped")
        if not skipped:
            continue
        name = case.get("name", "?")
        output = "".join(e.text or "" for e in case.iter("system-out"))
        # A test that skips by exit status (SKIP_RETURN_CODE) says why on its last line.
        last = [l.strip() for l in output.splitlines() if l.strip()][-1:]
        reasons = skip_reasons(output) or last or [""]
        for reason in reasons:
            if not reason or not any(re.search(a, reason) for a in allowed):
                bad.append((name, reason or "(no reason given)"))
    return bad


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", help="JUnit XML written by ctest --output-junit")
    parser.add_argument("--allow", action="append", default=[],
                        help="regex of another skip reason to accept (repeatable)")
    args = parser.parse_args()
    try:
        bad = check(args.junit, DEFAULT_ALLOWED + args.allow)
    except (OSError, ET.ParseError) as e:
        print(f"check_skips: cannot read {args.junit}: {e}", file=sys.stderr)
        return 2
    for name, reason in bad:
        print(f"check_skips: {name} was skipped: {reason}", file=sys.stderr)
    if bad:
        print(f"check_skips: {len(bad)} skip(s) for a reason this machine should satisfy "
              "(run as root, with network namespaces and ../shared; see README.md)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
