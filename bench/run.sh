#!/usr/bin/env bash
# Decode and prefill speed of k25 next to llama.cpp's llama-bench on the same GGUF files.
# Not a test: numbers depend on the machine. See docs/benchmarks.md.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: bench/run.sh [--peer DIR] [--threads "1 2"] [--shape tinyllama-1.1b] [--dtypes "q8_0 q4_0"]
                    [--reps N] [--bin DIR] [--out DIR] [--vocab-dir DIR] [--peer-quantize]
  --peer DIR       llama.cpp build/bin holding llama-bench (skipped with a message when absent)
  --threads LIST   thread counts to measure (default "1 2")
  --shape NAME     k25-mkmodel shape (default tinyllama-1.1b; see k25-mkmodel --list)
  --dtypes LIST    weight types (default "q8_0 q4_0")
  --reps N         repetitions of every measurement, averaged (default 3)
  --bin DIR        k25 binaries (default build/bin)
  --out DIR        scratch folder for the generated models, reused between runs
                   (default ${TMPDIR:-/tmp}/k25-bench)
  --vocab-dir DIR  llama.cpp vocabulary GGUFs (default ../shared/tokenizers/llamacpp-vocab)
  --peer-quantize  write each model as F16 with k25-mkmodel, then quantise it with the peer's
                   llama-quantize (e.g. --dtypes "q4_k_m q6_k"), so both engines read the
                   mixture llama.cpp users download
USAGE
}

# Paths given on the command line are taken relative to the caller's directory; the defaults
# relative to the repository root, where the script then runs.
absolute() { if [[ "$1" = /* ]]; then echo "$1"; else echo "$PWD/$1"; fi; }
peer=""
threads="1 2"
shape="tinyllama-1.1b"
dtypes="q8_0 q4_0"
reps=3
bin="build/bin"
out="${TMPDIR:-/tmp}/k25-bench"
vocab_dir="../shared/tokenizers/llamacpp-vocab"
peer_quantize=0
while [[ $# -gt 0 ]]; do
  if [[ "$1" == --* && "$1" != --help && "$1" != --peer-quantize && $# -lt 2 ]]; then
    echo "bench/run.sh: $1 needs a value" >&2
    exit 2
  fi
  case "$1" in
    --peer) peer="$(absolute "$2")"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --shape) shape="$2"; shift 2 ;;
    --dtypes) dtypes="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --bin) bin="$(absolute "$2")"; shift 2 ;;
    --out) out="$(absolute "$2")"; shift 2 ;;
    --vocab-dir) vocab_dir="$(absolute "$2")"; shift 2 ;;
    --peer-quantize) peer_quantize=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench/run.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."

for tool in k25-mkmodel k25-run; do
  if [[ ! -x "$bin/$tool" ]]; then
    echo "bench/run.sh: $bin/$tool not found; build first (make build)" >&2
    exit 1
  fi
done
llama_bench=""
if [[ -z "$peer" ]]; then
  echo "peer: not given (--peer DIR); measuring k25 only"
elif [[ -x "$peer/llama-bench" ]]; then
  llama_bench="$peer/llama-bench"
else
  echo "peer: $peer/llama-bench not found; measuring k25 only"
fi

mkdir -p "$out"
results="$out/results-$$.tsv"
: > "$results"
trap 'rm -f "$results"' EXIT

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
# Read bandwidth at thread count $1 next to the decode run of dtype $2, as k25-membw prints it
# ("read bandwidth, T thread(s): X GB/s"), appended to the results. A VM's bandwidth moves by 20%
# within minutes, so it is measured right before and after every decode repetition; the table
# divides by the mean of a row's measurements (what the host gave while it ran) and, in brackets,
# by the highest figure of the whole run (the stricter share, low whenever the host slowed down
# for a row).
measure_bandwidth() {
  [[ -x "$bin/k25-membw" ]] || return 0
  local membw_out
  membw_out="$("$bin/k25-membw" --threads "$1" 2>&1)" ||
    { echo "bench/run.sh: $bin/k25-membw failed: $membw_out" >&2; exit 1; }
  echo "$membw_out" | grep 'read bandwidth' | sed 's/^/bandwidth: /'
  python3 - "$membw_out" "$2" >> "$results" <<'PY'
import re, sys
for t, gbs in re.findall(r"read bandwidth, (\d+) thread\(s\): ([0-9.]+) GB/s", sys.argv[1]):
    print(f"bandwidth\t{sys.argv[2]}\t{t}\t{gbs}")
PY
}
[[ -x "$bin/k25-membw" ]] || echo "bandwidth: n/a ($bin/k25-membw not built)"

# Runs k25-run generate once and prints JSON field $1.
k25_once() {
  local field="$1"; shift
  local line
  if ! line="$("$bin/k25-run" generate "$@" --json 2>"$out/k25-run.log" | tail -n 1)" ||
    [[ -z "$line" ]]; then
    echo "bench/run.sh: k25-run generate $* failed (see $out/k25-run.log)" >&2
    return 1
  fi
  python3 -c 'import json, sys; print(json.loads(sys.argv[2])[sys.argv[1]])' "$field" "$line"
}

# Runs llama-bench once (its own warm-up, then one repetition) and prints its tok/s.
peer_once() {
  local peer_json
  peer_json="$("$llama_bench" "$@" -r 1 -o json 2>"$out/llama-bench.log")" ||
    { echo "llama-bench failed: $* (see $out/llama-bench.log)" >&2; return 1; }
  python3 -c 'import json, sys; print(json.loads(sys.argv[1])[0]["avg_ts"])' "$peer_json"
}

for dtype in $dtypes; do
  model="$out/$shape-$dtype.gguf"
  if [[ -f "$model" ]]; then
    echo "model: reusing $model"
  elif [[ "$peer_quantize" == 1 ]]; then
    if [[ ! -x "$peer/llama-quantize" ]]; then
      echo "bench/run.sh: --peer-quantize needs $peer/llama-quantize" >&2
      exit 1
    fi
    f16="$out/$shape-f16.gguf"
    if [[ ! -f "$f16" ]]; then
      echo "model: writing $f16"
      "$bin/k25-mkmodel" --shape "$shape" --dtype f16 --vocab-dir "$vocab_dir" -o "$f16.partial"
      mv "$f16.partial" "$f16"
    fi
    echo "model: llama-quantize $f16 -> $model (${dtype^^})"
    "$peer/llama-quantize" "$f16" "$model.partial" "${dtype^^}" 2 > "$out/llama-quantize.log" 2>&1 ||
      { echo "bench/run.sh: llama-quantize failed (see $out/llama-quantize.log)" >&2; exit 1; }
    mv "$model.partial" "$model"
  else
    echo "model: writing $model"
    "$bin/k25-mkmodel" --shape "$shape" --dtype "$dtype" --vocab-dir "$vocab_dir" \
      -o "$model.partial"
    mv "$model.partial" "$model"
  fi
  # What one decode token reads: the weights, with a MoE model's experts at used/count.
  bytes="$(python3 bench/weight_bytes_per_token.py "$model")"
  # Warm-up: pages the model into the page cache before anything is timed.
  "$bin/k25-run" generate -m "$model" -p "Hello" -n 4 -t 1 --json > /dev/null 2>"$out/k25-run.log" ||
    { echo "bench/run.sh: k25-run cannot run $model (see $out/k25-run.log)" >&2; exit 1; }
  for t in $threads; do
    echo "measuring $dtype, $t thread(s)..."
    # k25 and the peer take turns within every repetition, so both see the host in the same
    # state: a VM's speed moves by a fifth between minutes.
    for ((r = 0; r < reps; r++)); do
      pp="$(k25_once prefill_tokens_per_second -m "$model" --n-prompt 512 -n 0 -t "$t")"
      peer_pp="-"
      [[ -z "$llama_bench" ]] || peer_pp="$(peer_once -m "$model" -p 512 -n 0 -t "$t")"
      measure_bandwidth "$t" "$dtype"
      tg="$(k25_once tokens_per_second -m "$model" -p "Hello" -n 128 -t "$t" --ignore-eos)"
      measure_bandwidth "$t" "$dtype"
      peer_tg="-"
      [[ -z "$llama_bench" ]] || peer_tg="$(peer_once -m "$model" -p 0 -n 128 -t "$t")"
      printf 'k25\t%s\t%s\t%s\t%s\t%s\n' "$dtype" "$t" "$pp" "$tg" "$bytes" >> "$results"
      [[ -z "$llama_bench" ]] ||
        printf 'peer\t%s\t%s\t%s\t%s\t-\n' "$dtype" "$t" "$peer_pp" "$peer_tg" >> "$results"
    done
  done
done

python3 - "$results" "$shape" <<'PY'
import sys
path, shape = sys.argv[1], sys.argv[2]
bandwidth, adjacent, k25, peer = {}, {}, {}, {}
for line in open(path):
    kind, dtype, threads, *rest = line.rstrip("\n").split("\t")
    if kind == "bandwidth":
        bandwidth.setdefault(threads, []).append(float(rest[0]))
        adjacent.setdefault((dtype, threads), []).append(float(rest[0]))
    elif kind == "k25":
        k25.setdefault((dtype, threads), []).append((float(rest[0]), float(rest[1]), int(rest[2])))
    else:
        peer.setdefault((dtype, threads), []).append((float(rest[0]), float(rest[1])))

def mean_columns(reps):
    return tuple(sum(column) / len(column) for column in zip(*reps))

k25 = {key: mean_columns(reps) for key, reps in k25.items()}
peer = {key: mean_columns(reps) for key, reps in peer.items()}

def num(x, fmt="{:.2f}"):
    return "n/a" if x is None else fmt.format(x)

def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b

head = ["dtype", "threads", "k25 pp512 tok/s", "peer pp512 tok/s", "ratio",
        "k25 tg tok/s", "peer tg tok/s", "ratio", "k25 decode GB/s", "% of bandwidth"]
rows = []
for (dtype, threads), (pp, tg, size) in k25.items():
    ppp, ptg = peer.get((dtype, threads), (None, None))
    gbs = size * tg / 1e9
    share = "n/a"
    if (dtype, threads) in adjacent:
        near = adjacent[(dtype, threads)]
        share = (f"{100 * gbs * len(near) / sum(near):.0f}% "
                 f"[{100 * gbs / max(bandwidth[threads]):.0f}%]")
    rows.append([dtype, threads, num(pp), num(ppp), num(ratio(pp, ppp)), num(tg), num(ptg),
                 num(ratio(tg, ptg)), num(gbs), share])
print()
measured = ", ".join(f"{t} thread(s) {min(b):.1f}-{max(b):.1f} GB/s ({len(b)} measurements)"
                     for t, b in bandwidth.items()) or "n/a"
print(f"shape {shape}; read bandwidth: {measured}")
print("decode GB/s = weight bytes one token reads (bench/weight_bytes_per_token.py: MoE experts at")
print("used/count) x decode tok/s; % of the mean read bandwidth measured right before and after")
print("that decode run [% of the highest measured in the whole run at the same thread count]")
print("| " + " | ".join(head) + " |")
print("|" + "|".join("---" for _ in head) + "|")
for row in rows:
    print("| " + " | ".join(row) + " |")
PY
