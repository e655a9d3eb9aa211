#!/usr/bin/env bash
# Makes the manifest of a profile's pinned checkpoint revision from the Hugging Face Hub, on a
# machine with internet access and room for the checkpoint (docs/weights.md, "Creating the
# manifest of a real checkpoint"):
#
#   scripts/checkpoint-manifest.sh PROFILE DOWNLOAD_DIR
#
# 1. reads model.repository / model.revision / model.manifest from PROFILE (`sparkctl profile
#    show --json`; without model.manifest: checkpoints/OWNER--NAME/REVISION.json beside it);
# 2. `hf download REPO --revision REV --local-dir DOWNLOAD_DIR` (resumes: finished files stay);
# 3. `sparkctl weights manifest DOWNLOAD_DIR --check-hub`: hashes every file, compares every size
#    and every LFS file's SHA-256 with the Hub's listing of that revision, and only then writes
#    the manifest. Commit it; `sparkctl weights fetch` checks every later download against it.
#
# HF_TOKEN (gated repositories) and HF_ENDPOINT are honoured by hf. SPARKCTL names the sparkctl
# to use (default: build/bin/sparkctl, then the PATH's). Exit 0 ok, 2 failed.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 PROFILE DOWNLOAD_DIR   (e.g. $0 profiles/deepseek-v41-flash-tp4-ring.yaml /data/dsv41)" >&2
  exit 2
fi
profile=$1
dir=$2
here=$(cd "$(dirname "$0")/.." && pwd)
sparkctl=${SPARKCTL:-}
if [ -z "$sparkctl" ]; then
  if [ -x "$here/build/bin/sparkctl" ]; then sparkctl=$here/build/bin/sparkctl; else sparkctl=sparkctl; fi
fi
if ! command -v hf >/dev/null 2>&1; then
  echo "checkpoint-manifest: the Hugging Face CLI \`hf\` is missing; install it: python3 -m pip install -U huggingface_hub" >&2
  exit 2
fi
fields=$("$sparkctl" profile show "$profile" --json | python3 -c '
import json, os, sys
m = json.load(sys.stdin)["model"]
out = m.get("manifest_resolved") or ""
if not out:
    owner, name = m["repository"].split("/")
    out = os.path.join(os.path.dirname(sys.argv[1]), "checkpoints", owner + "--" + name,
                       m["revision"] + ".json")
print(m["repository"], m["revision"], out)' "$profile") || exit 2
read -r repo revision out <<<"$fields"
if [ -e "$out" ]; then
  echo "checkpoint-manifest: $out exists (a pinned manifest is only replaced on purpose: remove it first)" >&2
  exit 2
fi
echo "checkpoint-manifest: $repo@$revision -> $dir, manifest $out" >&2
hf download "$repo" --revision "$revision" --local-dir "$dir" >&2 || exit 2
mkdir -p "$(dirname "$out")"
"$sparkctl" weights manifest "$dir" --repo "$repo" --revision "$revision" --out "$out" --check-hub || exit 2
echo "checkpoint-manifest: wrote $out; commit it, and name it in the profile's model.manifest" >&2
