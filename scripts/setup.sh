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
  chromium                                  # the chat page test (headless, via playwright-core)
  libhiredis-dev                            # client of the shared KV tier (Redis)
  redis-server redis-tools                  # the shared-tier integration tests run real ones
  util-linux                                # unshare: the L3 full-disk test's private tmpfs
  qemu-user                                 # qemu-x86_64: the kernel-set test runs k25-run on emulated older CPUs
  ccache                                    # CI reuses the compilations of the session that built the submission
  # The aarch64 build (make aarch64-test): the cross compiler and Debian's arm64 libraries, run
  # under qemu-aarch64 (qemu-user above). yaml-cpp only as the runtime library: its -dev package
  # is not co-installable and would replace the amd64 one (see cmake/aarch64/yaml-cpp-config.cmake).
  g++-aarch64-linux-gnu libc6:arm64 libstdc++6:arm64 libyaml-cpp0.7:arm64
  libboost-system-dev:arm64 liburing-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64
  libhiredis-dev:arm64
)
NPM_CLIENT_DIR="$(cd "$(dirname "$0")/.." && pwd)/tests/integration/clients"

# The real clients of the integration tests (openai, @anthropic-ai/sdk, the Vercel AI SDK,
# playwright-core for the chat page in Chromium) are one npm project, installed exactly as its
# package-lock.json says. Node.js comes from Debian when the machine has none (Node >= 20).
install_npm_clients() {
  # node_modules/.k25-lock is the lockfile the last `npm ci` installed: skip while it matches.
  local stamp="$NPM_CLIENT_DIR/node_modules/.k25-lock"
  cmp -s "$NPM_CLIENT_DIR/package-lock.json" "$stamp" 2>/dev/null && return 0
  echo "setup: npm ci in $NPM_CLIENT_DIR"
  npm ci --prefix "$NPM_CLIENT_DIR" --no-audit --no-fund --loglevel=error
  cp "$NPM_CLIENT_DIR/package-lock.json" "$stamp"
}
command -v npm >/dev/null 2>&1 || PACKAGES+=(nodejs npm)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  install_npm_clients
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# The arm64 packages come from the same Debian mirror once dpkg accepts the architecture.
dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
install_npm_clients
