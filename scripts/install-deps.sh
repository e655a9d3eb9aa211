#!/usr/bin/env bash
# Installs every Debian package sparkctl needs to build, test and run the simulator, then fetches
# the pinned source of the one library Debian does not package (xgrammar, the structured-output
# grammar engine: scripts/fetch-xgrammar.sh). Idempotent: packages already present are left
# alone. Needs root (or sudo) for the packages.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git ca-certificates
  libssh-dev libyaml-cpp-dev libboost-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libcli11-dev libssl-dev libpcre2-dev libicu-dev
  rdma-core libibverbs-dev ibverbs-providers libgloo-dev
  wireguard-tools wireguard-go openssh-server openssh-client iproute2 iputils-ping netplan.io
  iptables
  ninja-build procps psmisc util-linux kmod curl python3 python3-venv python3-pip
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

"$(dirname "$0")/fetch-xgrammar.sh"
