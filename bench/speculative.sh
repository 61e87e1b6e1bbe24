#!/usr/bin/env bash
# Issue 16 benchmark (not a test): single-stream greedy decode on stories260K with speculative
# decoding off, with n-gram prompt lookup and with self-speculation (the engine's draft plan),
# through the serving engine (k25-run generate --speculative). Two workloads:
#   stories: the first sentence of each of the first N stories of ../shared/data/stories-sample.txt;
#   quote:   "quote the document": the prompt holds a document and starts it again, and the answer
#            is the document. A 260K-parameter story model cannot follow "repeat this", so each
#            document is a fixed point of the model: starting from its greedy story for a lead (the
#            first 8 words of a story), the document becomes the model's answer to "lead document
#            The end. lead" until the answer is the document itself (at most 8 rounds; leads that
#            do not settle are left out and counted). The answer is then 96 tokens of quote.
# Prints, per workload and mode: decode tok/s (tokens after the first over the decode time, all
# prompts and repetitions together), tokens per full-model forward in decode (generated tokens
# after the first / decode forward calls), drafted and accepted tokens; and whether each mode produced the tokens of "off" (they must). Self's draft
# forward calls (under the pruned plan) are not counted as full-model forwards.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: bench/speculative.sh [--bin DIR] [--shared DIR] [--threads N] [--prompts N] [--leads N]
                           [-n TOKENS] [--reps N]
  --bin DIR     k25 binaries (default build/bin)
  --shared DIR  the shared data folder (default ../shared)
  --threads N   compute threads (default 1)
  --prompts N   stories prompts (default 8)
  --leads N     quote leads tried (default 24: the stories' first 8 words, duplicates dropped)
  -n TOKENS     tokens to generate per stories prompt (default 128)
  --reps N      runs of every prompt in every mode (default 3)
USAGE
}

bin=build/bin
shared=../shared
threads=1
n_prompts=8
n_leads=24
reps=3
n_predict=128
doc_tokens=96
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --shared) shared="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --prompts) n_prompts="$2"; shift 2 ;;
    --leads) n_leads="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
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

# One file per prompt (exact text: a trailing space or newline changes what the model answers).
mkdir -p "$tmp/stories" "$tmp/quote"
# stories: first sentences (stories are separated by blank lines).
awk -v n="$n_prompts" 'BEGIN { RS = ""; } NR <= n { s = $0; sub(/\..*/, ".", s); print s }' \
  "$stories" | while IFS= read -r prompt; do
  printf '%s' "$prompt" > "$tmp/stories/$(ls "$tmp/stories" | wc -l).txt"
done
# quote: documents that are fixed points of the model (see the top of this file).
greedy() {  # prompt -> the model's greedy answer of doc_tokens tokens
  "$bin/k25-run" generate -m "$model" -p "$1" -n "$doc_tokens" --temp 0 -t "$threads" \
    --json 2> /dev/null | jq -r .text
}
awk -v n="$n_leads" 'BEGIN { RS = ""; } NR <= n { sub(/\..*/, ""); split($0, w, " "); s = w[1];
  for (i = 2; i <= 8 && i in w; ++i) s = s " " w[i]; print s }' "$stories" | sort -u > "$tmp/leads"
while IFS= read -r lead; do
  doc=$(greedy "$lead")
  for _ in 1 2 3 4 5 6 7 8; do
    answer=$(greedy "$lead$doc The end. $lead")
    if [[ "$answer" == "$doc" ]]; then
      printf '%s' "$lead$doc The end. $lead" > "$tmp/quote/$(ls "$tmp/quote" | wc -l).txt"
      break
    fi
    doc="$answer"
  done
done < "$tmp/leads"
echo "quote: $(ls "$tmp/quote" | wc -l) of $(wc -l < "$tmp/leads") leads settled into a document" \
  "the model quotes" >&2

run_workload() {  # name n_tokens
  local name="$1" n="$2"
  for mode in off ngram self; do : > "$tmp/$name-$mode.jsonl"; done
  # The modes take turns prompt by prompt, so a change in the machine's speed meets all of them.
  for ((r = 0; r < reps; r++)); do
    for f in "$tmp/$name"/*.txt; do
      for mode in off ngram self; do
        "$bin/k25-run" generate -m "$model" -p "$(cat "$f")" -n "$n" --temp 0 --ignore-eos \
          -t "$threads" --speculative "$mode" --json 2> /dev/null >> "$tmp/$name-$mode.jsonl"
      done
    done
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
         ($decoded / (map(.decode_ms) | add) * 1000 | round),
         ($decoded / $calls | . * 100 | round / 100),
         (map(.drafted_tokens) | add), (map(.accepted_tokens) | add), $same]
      | @tsv' "$tmp/$name-$mode.jsonl"
  done
}

printf 'workload\tmode\tprompts\tdecode_tok_s\ttokens_per_forward\tdrafted\taccepted\tsame_tokens\n'
run_workload stories "$n_predict"
run_workload quote "$doc_tokens"
