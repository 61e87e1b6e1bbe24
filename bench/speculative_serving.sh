#!/usr/bin/env bash
# Issue 16 benchmark (not a test): serving throughput with speculative decoding off and with
# n-gram prompt lookup, on the short and bimodal workloads at several concurrencies, through
# k25-server and k25-bench. Prompts are cut from ../shared/data/stories-sample.txt (real text),
# greedy, a fixed number of output tokens. Prints, per workload, concurrency and mode: output
# tok/s, TTFT p50, TPOT p50, and the drafted / accepted tokens the server counted
# (flash_spec_*_total in /metrics).
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: bench/speculative_serving.sh [--bin DIR] [--model GGUF] [--threads N] [--conc "1 4 24"]
                                    [--requests N] [--max-tokens N] [--scale F] [--out DIR]
  --model GGUF    default ../shared/models/stories260K.gguf (the only trained model)
  --conc LIST     concurrencies (default "1 4 24")
  --requests N    requests per run (default 48)
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
mkdir -p "$out"
pid=""
trap '[[ -n "$pid" ]] && kill "$pid" 2> /dev/null || true' EXIT

metric() {  # url name: the counter's value
  curl -sf "$1/metrics" | awk -v n="$2" '$1 == n { print $2 }'
}

echo "model $(basename "$model"), $threads threads, isa $("$bin/k25-run" generate -m "$model" \
  -p a -n 1 --json 2> /dev/null | jq -r .isa), $requests requests x $max_tokens tokens"
printf '%-8s %4s %-6s %10s %12s %12s %8s %8s\n' workload conc mode "tok/s" "ttft_p50_ms" \
  "tpot_p50_ms" drafted accepted
for mode in off ngram; do
  port=$(free_port)
  "$bin/k25-server" --model "$model" --threads "$threads" --port "$port" --max-batch-size 24 \
    --speculative "$mode" --log-requests false > "$out/server-$mode.log" 2>&1 &
  pid=$!
  url="http://127.0.0.1:$port"
  wait_ready "$url" "$pid"
  for workload in short bimodal; do
    for c in $conc; do
      drafted0=$(metric "$url" flash_spec_drafted_tokens_total)
      accepted0=$(metric "$url" flash_spec_accepted_tokens_total)
      report="$out/$workload-$c-$mode.json"
      "$bin/k25-bench" --url "$url" --workload "$workload" --scale "$scale" \
        --requests "$requests" --concurrency "$c" --max-tokens "$max_tokens" --temperature 0 \
        --text "$text" --tokenizer-model "$model" --no-progress --json "$report" \
        > /dev/null 2>> "$out/k25-bench.log"
      drafted=$(( $(metric "$url" flash_spec_drafted_tokens_total) - drafted0 ))
      accepted=$(( $(metric "$url" flash_spec_accepted_tokens_total) - accepted0 ))
      jq -r --arg w "$workload" --arg c "$c" --arg m "$mode" --arg d "$drafted" --arg a "$accepted" \
        '[$w, $c, $m, (.summary.output_tok_per_s | . * 10 | round / 10),
          (.summary.overall.ttft_ms.p50 | . * 10 | round / 10),
          (.summary.overall.tpot_ms.p50 | . * 100 | round / 100), $d, $a]
         | "\(.[0])\t\(.[1])\t\(.[2])\t\(.[3])\t\(.[4])\t\(.[5])\t\(.[6])\t\(.[7])"' "$report" \
        | awk -F'\t' '{ printf "%-8s %4s %-6s %10s %12s %12s %8s %8s\n", $1, $2, $3, $4, $5, $6, $7, $8 }'
    done
  done
  kill "$pid"; wait "$pid" 2> /dev/null || true; pid=""
done
