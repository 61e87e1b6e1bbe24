#!/usr/bin/env bash
# Runs every libFuzzer target in DIR for a bounded time (FUZZ_SECONDS, default 20) from its seed
# corpus under tests/fuzz/corpus/<target>/, FUZZ_JOBS targets at a time (default: one per core,
# so the 12 targets take 12 * 20 s / cores); any crash, leak or sanitizer report fails the run.
set -euo pipefail
dir=${1:?usage: run-fuzzers.sh BIN_DIR}
seconds=${FUZZ_SECONDS:-20}
jobs=${FUZZ_JOBS:-$(nproc)}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One target: its corpus is a copy of the seeds; prints one line, exits non-zero on a finding.
fuzz_one() {
  local fuzzer=$1 name
  name=$(basename "$fuzzer")
  mkdir -p "$work/$name"
  local seeds="$root/tests/fuzz/corpus/$name"
  [ -d "$seeds" ] && cp -r "$seeds"/. "$work/$name"/
  if ! "$fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -artifact_prefix="$work/$name.crash-" \
      "$work/$name" > "$work/$name.log" 2>&1; then
    echo "fuzz: $name FAILED"
    tail -40 "$work/$name.log"
    return 1
  fi
  echo "fuzz: $name $(grep -E '^#[0-9]+.*DONE' "$work/$name.log" | tail -1 || true)"
}

status=0
running=0
for fuzzer in "$dir"/*_fuzz; do
  [ -x "$fuzzer" ] || continue
  if [ "$running" -ge "$jobs" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  fuzz_one "$fuzzer" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
echo "fuzz: ${seconds}s per target, $jobs at a time"
exit $status
