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
  fio                                       # device baseline for the L3 read benchmark
  libgtest-dev libgmock-dev libbenchmark-dev
  python3                                   # small helper scripts in tests and benchmarks
  haproxy                                   # deploy/haproxy.cfg, run by the OpsHaproxy test
  libhiredis-dev                            # client of the shared KV tier (Redis)
  redis-server redis-tools                  # the shared-tier integration tests run real ones
)
NPM_CLIENT_DIR="$(cd "$(dirname "$0")/.." && pwd)/tests/integration/openai_client"

# The official openai npm client drives the server in one integration test (versions pinned by
# its package-lock.json); Node.js comes from Debian when the machine has none.
install_openai_client() {
  command -v npm >/dev/null 2>&1 || return 0
  [ -d "$NPM_CLIENT_DIR/node_modules/openai" ] && return 0
  npm install --prefix "$NPM_CLIENT_DIR" --no-audit --no-fund --loglevel=error ||
    echo "setup: npm install failed; the openai client test will be skipped" >&2
}
command -v npm >/dev/null 2>&1 || PACKAGES+=(nodejs npm)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  install_openai_client
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
install_openai_client
