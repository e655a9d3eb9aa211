#!/usr/bin/env bash
# Installs every package sparkctl needs to build, test and run the simulator, on Debian 12
# (bookworm) or Ubuntu 24.04 (noble; DGX OS is based on it), then fetches the pinned source of
# the one library neither distribution packages (xgrammar, the structured-output grammar engine:
# scripts/fetch-xgrammar.sh). Idempotent: packages already present are left alone. Needs root
# (or sudo) for the packages.
#
# On an x86-64 Debian host it also installs the aarch64 cross toolchain that
# scripts/build-aarch64.sh and scripts/test-aarch64.sh use (SPARK_CROSS=off skips it): Debian's
# g++-aarch64-linux-gnu, qemu-user-static, the arm64 multiarch -dev packages, and, for the two
# libraries whose Debian packages cannot be installed for two architectures at once (yaml-cpp's
# -dev package and gloo), their arm64 packages unpacked under $SPARK_CROSS_PREFIX.
set -euo pipefail

# ---- which distribution -------------------------------------------------------------------
. /etc/os-release
distro="${ID:-unknown}-${VERSION_ID:-unknown}"
case "$distro" in
  debian-12 | ubuntu-24.04) ;;
  *)
    echo "install-deps: $distro is not supported (Debian 12 or Ubuntu 24.04); trying the" \
      "Debian 12 package names" >&2
    ;;
esac

# The same names on both distributions (docs/platforms.md says how each was checked); on
# Ubuntu, libcli11-dev, libgloo-dev, libspdlog-dev and wireguard-go are in universe.
packages=(
  build-essential cmake pkg-config git ca-certificates
  libssh-dev libyaml-cpp-dev libboost-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libcli11-dev libssl-dev libpcre2-dev libicu-dev
  rdma-core libibverbs-dev ibverbs-providers libgloo-dev
  wireguard-tools wireguard-go openssh-server openssh-client iproute2 iputils-ping netplan.io
  iptables
  ninja-build procps psmisc util-linux kmod curl python3 python3-venv python3-pip
)
# The dashboard's browser test (tests/sparkctl/dashboard) drives Debian's chromium through its
# driver; libjs-chart.js is where sparkctl/dashboard/vendor/chart.js-3.9.1 comes from (docs/dashboard.md).
# Ubuntu ships chromium only as a snap: there the browser test fails naming what is missing.
[ "$distro" = ubuntu-24.04 ] || packages+=(chromium chromium-driver libjs-chart.js)

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
updated=0
apt_update() {
  [ "$updated" -eq 1 ] || { $SUDO apt-get update -qq; updated=1; }
}

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

install_missing() {
  local missing=() p
  for p in "$@"; do installed "$p" || missing+=("$p"); done
  if [ "${#missing[@]}" -eq 0 ]; then
    return 0
  fi
  echo "install-deps: installing ${missing[*]}"
  apt_update
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

if [ "$distro" = ubuntu-24.04 ] && ! grep -rqs "^[^#]*universe" /etc/apt/sources.list \
  /etc/apt/sources.list.d/; then
  # libcli11-dev, libgloo-dev, libspdlog-dev and friends live in noble's universe component.
  echo "install-deps: enabling the universe component"
  install_missing software-properties-common
  $SUDO add-apt-repository -y universe
  updated=0
fi

install_missing "${packages[@]}"
echo "install-deps: ${#packages[@]} packages present ($distro)"

"$(dirname "$0")/fetch-xgrammar.sh"

# ---- the aarch64 cross toolchain (x86-64 Debian hosts) --------------------------------------
cross="${SPARK_CROSS:-auto}"
if [ "$cross" = auto ]; then
  cross=off
  [ "$distro" = debian-12 ] && [ "$(dpkg --print-architecture)" = amd64 ] && cross=on
fi
[ "$cross" = on ] || exit 0

if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "install-deps: adding the arm64 architecture (multiarch)"
  $SUDO dpkg --add-architecture arm64
  updated=0
fi
cross_packages=(
  g++-aarch64-linux-gnu qemu-user-static
  libc6-dev:arm64 libstdc++-12-dev:arm64 libssh-dev:arm64 libboost-dev:arm64
  libspdlog-dev:arm64 libfmt-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64 libssl-dev:arm64
  libpcre2-dev:arm64 libicu-dev:arm64 libibverbs-dev:arm64 libhiredis-dev:arm64
)
install_missing "${cross_packages[@]}"

# Not co-installable for two architectures (no "Multi-Arch: same"): unpacked, not installed.
prefix="${SPARK_CROSS_PREFIX:-/opt/sparkctl-cross/aarch64-linux-gnu}"
unpacked=(libyaml-cpp0.7:arm64 libyaml-cpp-dev:arm64 libgloo0:arm64 libgloo-dev:arm64)
want=""
apt_update_needed=1
for p in "${unpacked[@]}"; do
  v=$(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/ {print $2}')
  if [ -z "$v" ] || [ "$v" = "(none)" ]; then
    [ "$apt_update_needed" -eq 1 ] && { apt_update; apt_update_needed=0; }
    v=$(apt-cache policy "$p" | awk '/Candidate:/ {print $2}')
  fi
  want+="$p=$v"$'\n'
done
if [ "$(cat "$prefix/.unpacked" 2>/dev/null)" != "$(printf '%s' "$want")" ]; then
  echo "install-deps: unpacking ${unpacked[*]} into $prefix"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  chmod 755 "$work"
  (cd "$work" && apt-get download -q "${unpacked[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true)
  $SUDO rm -rf "$prefix"
  $SUDO mkdir -p "$prefix"
  for deb in "$work"/*.deb; do $SUDO dpkg-deb -x "$deb" "$prefix"; done
  printf '%s' "$want" | $SUDO tee "$prefix/.unpacked" >/dev/null
fi
echo "install-deps: aarch64 cross toolchain present (unpacked libraries in $prefix)"
