#!/usr/bin/env bash
# Issue 6 benchmarks on the ~125M Llama shape (k25-mkmodel --shape llama-125m, Q8_0):
#   1. Levels 1 and 2: `k25-planbench` times the full model, the Level 1 rule's plan and each
#      calibrated domain's Level 2 plan (gates from k25-convert) in one run, alternating, and
#      prints the compute each plan skips next to the speedup it gives;
#   2. Level 3: two servers with the Level 1 rule on, adaptive pruning on (A) and off (B). Speed:
#      the same short requests go to A and B in turns (k25-bench, A B A B) on the 125M shape.
#      Outputs (on the trained stories260K, where the KV reacts to the text): k25-verify compares
#      B with itself (repeated runs must be identical) and A with B (what Level 3 changes).
# Run it on an idle machine; results go to --out.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: bench/flash.sh [--bin DIR] [--out DIR] [--reps N] [--ratio R]
  --bin DIR    k25 binaries (default build/bin)
  --out DIR    models and results (default /tmp/k25-bench)
  --reps N     k25-planbench repetitions (default 5)
  --ratio R    pruning ratio given to k25-convert (default 0.3)
USAGE
}

bin=build/bin
out=/tmp/k25-bench
reps=5
ratio=0.3
shared="$(cd "$(dirname "$0")/.." && pwd)/../shared"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --ratio) ratio="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
source "$(dirname "$0")/lib.sh"

model=$(bench_model "$bin" "$out" q8_0)
text="$shared/data/stories-sample.txt"
converted="$out/flash-125m-r$ratio"
if [[ ! -f "$converted/model.gguf" ]]; then
  echo "== k25-convert: gates for 'stories' at pruning ratio $ratio"
  # Random weights: no quality bound means anything, so none is applied; the plans are real.
  "$bin/k25-convert" --model-path "$model" --output-path "$converted" --enable-gated-pruning \
    --pruning-ratio "$ratio" --calibration "stories=$text" --max-chunks 4 --gen-tokens 8 \
    --chunk-tokens 64 --max-ppl-increase 1e9 --min-agreement 0 --max-rouge-drop 1e9 \
    > "$out/flash-convert.log" 2>&1
fi

echo "== Levels 1 and 2 vs the full model: k25-planbench, 2 threads, $reps repetitions"
for shape in "256 64" "1024 64"; do
  set -- $shape
  echo "-- prompt $1 tokens, $2 generated"
  "$bin/k25-planbench" -m "$converted/model.gguf" --metadata "$converted/k25_metadata" \
    --prompt-file "$text" --npp "$1" --ntg "$2" --reps "$reps" -t 2 2> /dev/null \
    | tee "$out/flash-planbench-$1.md"
done

level3_servers() {  # model: starts A (Level 1 rule + Level 3) and B (rule only), 1 thread each
  port_a=$(free_port)
  "$bin/k25-server" --model "$1" --threads 1 --port "$port_a" --rule-pruning on \
    --log-requests false > "$out/flash-a.log" 2>&1 &
  pid_a=$!
  port_b=$(free_port)
  "$bin/k25-server" --model "$1" --threads 1 --port "$port_b" --rule-pruning on \
    --disable-adaptive-pruning --log-requests false > "$out/flash-b.log" 2>&1 &
  pid_b=$!
  trap 'kill $pid_a $pid_b 2> /dev/null || true' EXIT
  wait_ready "http://127.0.0.1:$port_a" "$pid_a"
  wait_ready "http://127.0.0.1:$port_b" "$pid_b"
}
stop_level3_servers() {
  kill "$pid_a" "$pid_b"; wait "$pid_a" "$pid_b" 2> /dev/null || true
  trap - EXIT
}

echo "== Level 3 on (A) vs off (B), speed: 125M shape, Level 1 rule on, short requests, A B A B"
level3_servers "$model"
for round in 1 2; do
  for side in a b; do
    port_var="port_$side"
    "$bin/k25-bench" --url "http://127.0.0.1:${!port_var}" --workload short --requests 16 \
      --concurrency 4 --max-tokens 64 --tokenizer-model "$model" \
      --json "$out/flash-level3-$side-$round.json" 2> /dev/null | grep -E '^throughput|^overall' \
      | sed "s/^/$side round $round: /"
  done
done
for side in a b; do
  port_var="port_$side"
  curl -s "http://127.0.0.1:${!port_var}/metrics" | grep -E '^flash_adaptive_plan_updates_total' \
    | sed "s/^/$side: /" || true
done
stop_level3_servers

# Level 3 reacts to how the KV changes, which a random-weight model does not show: the outputs
# are compared on the trained stories260K model (120 tokens: Level 3 decides at 32, 64 and 96).
echo "== Level 3 on (A) vs off (B), outputs: stories260K, 120 tokens, k25-verify"
level3_servers "$shared/models/stories260K.gguf"
echo "-- B vs B (repeated runs without Level 3 must be identical)"
"$bin/k25-verify" --a "http://127.0.0.1:$port_b" --b "http://127.0.0.1:$port_b" \
  --max-tokens 120 --report "$out/flash-verify-bb.json" || true
echo "-- B vs A (what Level 3 changes)"
"$bin/k25-verify" --a "http://127.0.0.1:$port_b" --b "http://127.0.0.1:$port_a" \
  --max-tokens 120 --report "$out/flash-verify-ba.json" || true
curl -s "http://127.0.0.1:$port_a/metrics" | grep -E '^flash_adaptive_plan_updates_total' || true
stop_level3_servers
