#!/usr/bin/env bash
# Runs every libFuzzer target in DIR for a bounded time (FUZZ_SECONDS, default 20, so that the
# 12 targets keep .ci/run within its time budget) from its seed corpus under
# tests/fuzz/corpus/<target>/; any crash fails the run.
set -euo pipefail
dir=${1:?usage: run-fuzzers.sh BIN_DIR}
seconds=${FUZZ_SECONDS:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
status=0
for fuzzer in "$dir"/*_fuzz; do
  [ -x "$fuzzer" ] || continue
  name=$(basename "$fuzzer")
  seeds="$root/tests/fuzz/corpus/$name"
  work=$(mktemp -d)
  [ -d "$seeds" ] && cp -r "$seeds"/. "$work"/
  echo "fuzz: $name for ${seconds}s"
  if ! "$fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -artifact_prefix="$work/" "$work" \
      > "$work.log" 2>&1; then
    echo "fuzz: $name FAILED"; tail -40 "$work.log"; status=1
  else
    grep -E '^#[0-9]+.*DONE' "$work.log" | tail -1 || true
  fi
  rm -rf "$work" "$work.log"
done
exit $status
