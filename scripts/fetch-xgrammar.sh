#!/usr/bin/env bash
# Fetches the pinned xgrammar source release (scripts/xgrammar.lock: PyPI sdist, SHA-256
# checked) and unpacks it into third_party/xgrammar-<version>, which CMake builds as a static
# library with our toolchain (cmake/SparkXgrammar.cmake). Idempotent: an unpacked tree with its
# stamp is left alone. Needs curl or python3, and network access to files.pythonhosted.org.
# Usage: scripts/fetch-xgrammar.sh [DEST_DIR]   (default: <repo>/third_party)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=xgrammar.lock
source <(grep -E '^XGRAMMAR_[A-Z0-9_]+=' "$repo/scripts/xgrammar.lock")
dest="${1:-$repo/third_party}"
dir="$dest/xgrammar-$XGRAMMAR_VERSION"
stamp="$dir/.sparkctl-sha256"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$XGRAMMAR_SHA256" ]; then
  echo "fetch-xgrammar: $dir present (xgrammar $XGRAMMAR_VERSION)"
  exit 0
fi
mkdir -p "$dest"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
archive="$tmp/xgrammar.tar.gz"
echo "fetch-xgrammar: downloading xgrammar $XGRAMMAR_VERSION from $XGRAMMAR_URL"
if command -v curl >/dev/null; then
  curl -fsSL --retry 3 -o "$archive" "$XGRAMMAR_URL"
else
  python3 -c 'import sys,urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' \
    "$XGRAMMAR_URL" "$archive"
fi
got="$(sha256sum "$archive" | cut -d' ' -f1)"
if [ "$got" != "$XGRAMMAR_SHA256" ]; then
  echo "fetch-xgrammar: SHA-256 mismatch for $XGRAMMAR_URL: got $got, expected" \
    "$XGRAMMAR_SHA256 (scripts/xgrammar.lock); refusing to build from it" >&2
  exit 2
fi
tar -xzf "$archive" -C "$tmp"
rm -rf "$dir"
mv "$tmp/xgrammar-$XGRAMMAR_VERSION" "$dir"
echo "$XGRAMMAR_SHA256" > "$stamp"
echo "fetch-xgrammar: unpacked into $dir"
