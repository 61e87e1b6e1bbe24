#!/usr/bin/env bash
# Issue 16 benchmark (not a test): serving throughput with speculative decoding off and with
# n-gram prompt lookup, on the short and bimodal workloads at several concurrencies, through
# k25-server and k25-bench. Prompts are cut from ../shared/data/stories-sample.txt (real text),
# greedy, a fixed number of output tokens. Prints, per workload, concurrency and mode, medians
# over the runs: output tok/s, TTFT p50, TPOT p50, and the drafted / accepted tokens the server
# counted per run (flash_spec_*_total in /metrics).
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: bench/speculative_serving.sh [--bin DIR] [--model GGUF] [--threads N] [--conc "1 4 24"]
                                    [--requests N] [--max-tokens N] [--scale F] [--out DIR]
  --model GGUF    default ../shared/models/stories260K.gguf (the only trained model)
  --conc LIST     concurrencies (default "1 4 24")
  --requests N    requests per run (default 48)
  --reps N        runs per workload, concurrency and mode, the modes taking turns (default 3)
  --max-tokens N  output tokens per request (default 64)
  --scale F       k25-bench's prompt length scale (default 0.02: bimodal ~4/250 tokens)
USAGE
}

bin=build/bin
model=../shared/models/stories260K.gguf
text=../shared/data/stories-sample.txt
threads=2
conc="1 4 24"
requests=48
reps=3
max_tokens=64
scale=0.02
out=/tmp/k25-spec-serving
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --conc) conc="$2"; shift 2 ;;
    --requests) requests="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --max-tokens) max_tokens="$2"; shift 2 ;;
    --scale) scale="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
source "$(dirname "$0")/lib.sh"
for f in "$bin/k25-server" "$bin/k25-bench" "$model" "$text"; do
  [[ -e "$f" ]] || { echo "missing: $f" >&2; exit 1; }
done
[[ "$reps" -ge 1 ]] || { echo "--reps must be at least 1" >&2; exit 2; }
mkdir -p "$out"

metric() {  # url name: the counter's value
  curl -sf "$1/metrics" | awk -v n="$2" '$1 == n { print $2 }'
}

echo "model $(basename "$model"), $threads threads, isa $("$bin/k25-run" generate -m "$model" \
  -p a -n 1 --json 2> /dev/null | jq -r .isa), $requests requests x $max_tokens tokens, $reps runs each"
printf '%-8s %4s %-6s %10s %12s %12s %8s %8s\n' workload conc mode "tok/s" "ttft_p50_ms" \
  "tpot_p50_ms" drafted accepted
# Both servers run side by side (an idle one costs nothing) and the modes take turns, run by
# run, so a change in the machine's speed meets both; each row is the median of --reps runs.
declare -A url
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done' EXIT
for mode in off ngram; do
  port=$(free_port)
  "$bin/k25-server" --model "$model" --threads "$threads" --port "$port" --max-batch-size 24 \
    --speculative "$mode" --log-requests false > "$out/server-$mode.log" 2>&1 &
  pids+=($!)
  url[$mode]="http://127.0.0.1:$port"
  wait_ready "${url[$mode]}" "$!"
done
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for workload in short bimodal; do
  for c in $conc; do
    for mode in off ngram; do : > "$out/$workload-$c-$mode.runs"; done
    for ((r = 0; r < reps; r++)); do
      for mode in off ngram; do
        u="${url[$mode]}"
        drafted0=$(metric "$u" flash_spec_drafted_tokens_total)
        accepted0=$(metric "$u" flash_spec_accepted_tokens_total)
        report="$out/$workload-$c-$mode-$r.json"
        "$bin/k25-bench" --url "$u" --workload "$workload" --scale "$scale" \
          --requests "$requests" --concurrency "$c" --max-tokens "$max_tokens" --temperature 0 \
          --text "$text" --tokenizer-model "$model" --no-progress --json "$report" \
          > /dev/null 2>> "$out/k25-bench.log"
        drafted=$(( $(metric "$u" flash_spec_drafted_tokens_total) - drafted0 ))
        accepted=$(( $(metric "$u" flash_spec_accepted_tokens_total) - accepted0 ))
        jq -r --arg d "$drafted" --arg a "$accepted" '[.summary.output_tok_per_s,
          .summary.overall.ttft_ms.p50, .summary.overall.tpot_ms.p50, $d, $a] | @tsv' "$report" \
          >> "$out/$workload-$c-$mode.runs"
      done
    done
    for mode in off ngram; do
      runs="$out/$workload-$c-$mode.runs"
      printf '%-8s %4s %-6s %10.1f %12.1f %12.2f %8d %8d\n' "$workload" "$c" "$mode" \
        "$(cut -f1 "$runs" | median)" "$(cut -f2 "$runs" | median)" "$(cut -f3 "$runs" | median)" \
        "$(cut -f4 "$runs" | median)" "$(cut -f5 "$runs" | median)"
    done
  done
done
