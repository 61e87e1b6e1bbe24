#!/usr/bin/env bash
# Issue 16 benchmark (not a test): single-stream greedy decode on stories260K with speculative
# decoding off, with n-gram prompt lookup and with self-speculation (the engine's draft plan),
# through the serving engine (k25-run generate --speculative). Two workloads:
#   stories: the first sentence of each of the first N stories of ../shared/data/stories-sample.txt;
#   quote:   a prompt that holds a document and starts it again ("quote the document"), so the
#            answer repeats text of the prompt, which is what prompt lookup can draft.
# Prints, per workload and mode: decode tok/s (mean over the prompts), tokens per full-model
# forward in decode (generated tokens after the first / decode forward calls), drafted and
# accepted tokens; and whether each mode produced the tokens of "off" (they must). Self's draft
# forward calls (under the pruned plan) are not counted as full-model forwards.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: bench/speculative.sh [--bin DIR] [--shared DIR] [--threads N] [--prompts N] [-n TOKENS]
  --bin DIR     k25 binaries (default build/bin)
  --shared DIR  the shared data folder (default ../shared)
  --threads N   compute threads (default 1)
  --prompts N   stories prompts (default 8)
  -n TOKENS     tokens to generate per prompt (default 128)
USAGE
}

bin=build/bin
shared=../shared
threads=1
n_prompts=8
n_predict=128
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --shared) shared="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --prompts) n_prompts="$2"; shift 2 ;;
    -n) n_predict="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
model="$shared/models/stories260K.gguf"
stories="$shared/data/stories-sample.txt"
for f in "$bin/k25-run" "$model" "$stories"; do
  [[ -e "$f" ]] || { echo "missing: $f" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# stories: first sentences (stories are separated by blank lines).
awk -v n="$n_prompts" 'BEGIN { RS = ""; } NR <= n { s = $0; sub(/\..*/, ".", s); print s }' \
  "$stories" > "$tmp/stories.txt"
# quote: the document is a story of stories260K's own (its greedy continuation of a lead); the
# prompt holds it and then starts it again, so an answer that quotes the document is the
# model's likely one. A tiny story model cannot follow "repeat this"; this is the closest
# workload where answers quote their input.
for lead in "Once upon a time" "Lily and Ben" "One day, a boy named Tom"; do
  doc=$("$bin/k25-run" generate -m "$model" -p "$lead" -n 96 --temp 0 -t "$threads" \
    --json 2> /dev/null | jq -r .text)
  printf '%s\n' "$lead$doc The end. $lead" | tr '\n' ' '
  echo
done > "$tmp/quote.txt"

run_workload() {  # name file
  local name="$1" file="$2"
  for mode in off ngram self; do
    : > "$tmp/$name-$mode.jsonl"
    while IFS= read -r prompt; do
      "$bin/k25-run" generate -m "$model" -p "$prompt" -n "$n_predict" --temp 0 --ignore-eos \
        -t "$threads" --speculative "$mode" --json 2> /dev/null >> "$tmp/$name-$mode.jsonl"
    done < "$file"
  done
  for mode in off ngram self; do
    local same=yes
    if ! diff <(jq -c .tokens "$tmp/$name-off.jsonl") <(jq -c .tokens "$tmp/$name-$mode.jsonl") \
        > /dev/null; then
      same=NO
    fi
    jq -rs --arg name "$name" --arg mode "$mode" --arg same "$same" '
      (map(.tokens | length - 1) | add) as $decoded
      | (map(.decode_forward_calls) | add) as $calls
      | [$name, $mode, length,
         ((map(.tokens_per_second) | add) / length | . * 10 | round / 10),
         ($decoded / $calls | . * 100 | round / 100),
         (map(.drafted_tokens) | add), (map(.accepted_tokens) | add), $same]
      | @tsv' "$tmp/$name-$mode.jsonl"
  done
}

printf 'workload\tmode\tprompts\tdecode_tok_s\ttokens_per_forward\tdrafted\taccepted\tsame_tokens\n'
run_workload stories "$tmp/stories.txt"
run_workload quote "$tmp/quote.txt"
