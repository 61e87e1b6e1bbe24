#!/usr/bin/env bash
# Installs every Debian package that building, testing and benchmarking k25 needs.
# Idempotent; run as root (or with sudo available) on Debian 12.
set -euo pipefail
PACKAGES=(
  build-essential cmake ninja-build pkg-config git curl ca-certificates
  clang libclang-rt-14-dev                  # libFuzzer target and sanitizer runtimes
  nlohmann-json3-dev libyaml-cpp-dev libcli11-dev
  libboost-dev libboost-system-dev          # Boost.Beast / Asio (header-only) for the HTTP server
  liburing-dev                              # io_uring for the disk KV tier
  libgtest-dev libgmock-dev libbenchmark-dev
  python3                                   # small helper scripts in tests and benchmarks
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
