#!/usr/bin/env bash
# Decode speed of a JSON-schema-constrained request next to the same request unconstrained
# (k25-run generate, temperature 1, same seeds). Not a test: numbers depend on the machine.
# See docs/constrained-decoding.md.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: bench/constrained.sh [--models "stories260K random-qwen3"] [--reps N] [--tokens N]
                            [--threads N] [--schema FILE] [--bin DIR]
  --models LIST  GGUF names in ../shared/models (default "stories260K random-qwen3": vocabularies
                 of 512 and 151,936 tokens; the mask cost grows with the vocabulary)
  --reps N       seeds per configuration; the median is reported (default 5)
  --tokens N     tokens per request (default 128)
  --threads N    threads (default 2)
  --schema FILE  JSON schema (default bench/data/person.schema.json)
  --bin DIR      k25 binaries (default build/bin)
USAGE
}

cd "$(dirname "$0")/.."
models="stories260K random-qwen3"
reps=5
tokens=128
threads=2
schema=bench/data/person.schema.json
bin=build/bin
while [[ $# -gt 0 ]]; do
  case "$1" in
    --models) models="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --tokens) tokens="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --schema) schema="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done

tok_s() {  # model seed extra-args...: decode tok/s of one run
  local model="$1" seed="$2"
  shift 2
  "$bin/k25-run" generate -m "../shared/models/$model.gguf" -p "Once upon a time" -n "$tokens" \
    --temp 1 --seed "$seed" -t "$threads" --json "$@" 2> /dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_second"])'
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

printf '| model | unconstrained tok/s | json_schema tok/s | ratio |\n|---|---|---|---|\n'
for model in $models; do
  free="" constrained=""
  for seed in $(seq 1 "$reps"); do  # alternate, so that load changes hit both alike
    free+="$(tok_s "$model" "$seed" --ignore-eos)"$'\n'
    constrained+="$(tok_s "$model" "$seed" --json-schema "$schema")"$'\n'
  done
  f=$(printf '%s' "$free" | median)
  c=$(printf '%s' "$constrained" | median)
  printf '| %s | %.1f | %.1f | %.2f |\n' "$model" "$f" "$c" "$(echo "$c / $f" | bc -l)"
done
