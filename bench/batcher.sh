#!/usr/bin/env bash
# Issue 4 benchmarks, k25 side by side with llama.cpp on the same model file and thread count:
#   1. batched decode: `k25-run batched-bench` against `llama-batched-bench` (tok/s at batch
#      1, 4, 8, 16, 24);
#   2. long prefill (3072 tokens, one sequence): `k25-run batched-bench` against
#      `llama-batched-bench`;
#   3. serving: `k25-bench --workload bimodal` against k25-server and then llama-server.
# Prints both tables and writes the raw JSON into --out. Run it on an idle machine.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/batcher.sh [--bin DIR] [--peer DIR] [--out DIR] [--threads N] [--dtype q8_0]
                        [--skip-decode] [--skip-serving] [--requests N] [--scale F] [--kv-mb M]
                        [--rate R] [--runs N] [--client k25-bench|openai]
  --bin DIR     k25 binaries (default build/bin)
  --peer DIR    llama.cpp build/bin with llama-batched-bench and llama-server (skipped if absent)
  --out DIR     models and results (default /tmp/k25-bench)
  --rate R      bimodal requests arrive open loop, R per second (Poisson, the same times for both
                servers), instead of 24 in flight at most: with the closed loop the requests
                after the first 24 are sent as earlier ones finish, so a faster server gets them
                sooner, into its queue, and a slower one later, when it may be idle
  --runs N      the bimodal workload N times (k25 then the peer each time, default 1); prints
                each run's k25/peer ratios and their medians: the peer's short and gold TTFTs
                depend on which of its slots the short prompts take, and move 10x between runs
  --client C    who sends the bimodal workload: k25-bench (default) or openai, the official npm
                client through bench/openai_bimodal.mjs (its own draw: 13 long, 19 short
                prompts cut from real text; closed loop only), an independent second measurement
EOF
}

bin=build/bin
peer=../peer/llama.cpp/build/bin
out=/tmp/k25-bench
threads=2
dtype=q8_0
skip_decode=0
skip_serving=0
requests=32
scale=0.25
kv_mb=600   # k25's L2 KV budget; the peer reserves every slot's full context
rate=""
runs=1
client=k25-bench
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --peer) peer="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --dtype) dtype="$2"; shift 2 ;;
    --skip-decode) skip_decode=1; shift ;;
    --skip-serving) skip_serving=1; shift ;;
    --requests) requests="$2"; shift 2 ;;
    --scale) scale="$2"; shift 2 ;;
    --kv-mb) kv_mb="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --client) client="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done

[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "--runs takes a positive integer, not '$runs'" >&2; exit 2; }
case "$client" in
  k25-bench) stem=bimodal ;;
  openai)
    stem=openai-bimodal
    [[ -z $rate ]] || { echo "--client openai sends a closed loop: no --rate" >&2; exit 2; } ;;
  *) echo "--client takes k25-bench or openai, not '$client'" >&2; exit 2 ;;
esac

source "$(dirname "$0")/lib.sh"
model=$(bench_model "$bin" "$out" "$dtype")
have_peer=0
if [[ -x "$peer/llama-batched-bench" && -x "$peer/llama-server" ]]; then
  have_peer=1
else
  echo "peer not found in $peer: k25 only" >&2
fi

if [[ $skip_decode == 0 ]]; then
  echo "== batched decode: npp 128, ntg 128, $threads threads, $(basename "$model")"
  echo "-- k25"
  "$bin/k25-run" batched-bench -m "$model" -t "$threads" --npp 128 --ntg 128 \
    --npl 1,4,8,16,24 | tee "$out/k25-batched.txt"
  if [[ $have_peer == 1 ]]; then
    echo "-- llama.cpp"
    "$peer/llama-batched-bench" -m "$model" -t "$threads" -c 8192 -b 2048 -ub 512 \
      -npp 128 -ntg 128 -npl 1,4,8,16,24 2> /dev/null | grep '^|' | tee "$out/peer-batched.txt"
  fi
fi

if [[ $skip_decode == 0 ]]; then
  # The bimodal workload's long prompts are ~3100 tokens: their prefill, alone, is the floor of a
  # long prompt's TTFT (k25 runs it in 128-token micro-tasks, as the server does).
  echo "== long prefill: npp 3072, one sequence, $threads threads"
  echo "-- k25"
  "$bin/k25-run" batched-bench -m "$model" -t "$threads" --npp 3072 --ntg 1 --npl 1 \
    --ubatch 128 | tee "$out/k25-long-prefill.txt"
  if [[ $have_peer == 1 ]]; then
    echo "-- llama.cpp"
    "$peer/llama-batched-bench" -m "$model" -t "$threads" -c 4096 -b 2048 -ub 512 \
      -npp 3072 -ntg 1 -npl 1 2> /dev/null | grep '^|' | tee "$out/peer-long-prefill.txt"
  fi
fi

if [[ -n $rate ]]; then
  arrivals=(--rate "$rate")
  arrivals_text="open loop at $rate requests/s"
else
  arrivals=(--concurrency 24)
  arrivals_text="concurrency 24"
fi
# Run r writes $out/k25-$stem.json (r = 1) or $out/k25-r<r>-$stem.json, and the same for peer.
run_suffix() { [[ $1 == 1 ]] || echo "-r$1"; }
run_bimodal() {  # name url pid
  if [[ $client == openai ]]; then
    node "$(dirname "$0")/openai_bimodal.mjs" --url "$2" --scale "$scale" --requests "$requests" \
      --concurrency 24 --max-tokens 32 --server-pid "$3" --json "$out/$1-$stem.json"
    return
  fi
  "$bin/k25-bench" --url "$2" --workload bimodal --scale "$scale" --requests "$requests" \
    "${arrivals[@]}" --max-tokens 32 --sla-mix 20/30/50 --server-pid "$3" \
    --tokenizer-model "$model" --json "$out/$1-$stem.json" --plot "$out/$1-bimodal.svg" \
    --timeout-s 900
}

if [[ $skip_serving == 0 ]]; then
  pid=""
  suffixes=()
  trap 'kill $pid 2> /dev/null || true' EXIT
  for ((r = 1; r <= runs; r++)); do
    suffix=$(run_suffix "$r")
    suffixes+=("$suffix")
    echo "== bimodal --scale $scale, $requests requests, $arrivals_text, 32 output tokens," \
      "sent by $client (run $r of $runs)"
    port=$(free_port)
    "$bin/k25-server" --model "$model" --threads "$threads" --port "$port" --max-batch-size 24 \
      --ctx-size 4096 --l2-cache-size-mb "$kv_mb" --log-requests false ${K25_SERVER_ARGS:-} \
      > "$out/k25-server.log" 2>&1 &
    pid=$!
    wait_ready "http://127.0.0.1:$port" "$pid"
    echo "-- k25"
    run_bimodal "k25$suffix" "http://127.0.0.1:$port" "$pid"
    kill "$pid"; wait "$pid" || true
    if [[ $have_peer == 1 ]]; then
      port=$(free_port)
      "$peer/llama-server" -m "$model" -t "$threads" -np 24 -c $((24 * 4096)) --port "$port" \
        --host 127.0.0.1 > "$out/peer-server.log" 2>&1 &
      pid=$!
      wait_ready "http://127.0.0.1:$port" "$pid"
      echo "-- llama.cpp"
      run_bimodal "peer$suffix" "http://127.0.0.1:$port" "$pid"
      kill "$pid"; wait "$pid" || true
    fi
  done
  trap - EXIT
  if [[ $have_peer == 1 ]]; then
    # Issue 15's serving rows, k25 / peer from the same run, and the median of each over runs.
    python3 - "$out" "$stem" "${suffixes[@]}" <<'PY'
import json, os, statistics, sys
out, stem, suffixes = sys.argv[1], sys.argv[2], sys.argv[3:]  # run r: {name}{suffix}-{stem}.json
def load(name, suffix):
    return json.load(open(os.path.join(out, f"{name}{suffix}-{stem}.json")))
def ttft(s, group, cls, pct):  # None when the run had no request of that class
    c = s["by_class"].get(group, {}).get(cls)
    return c["ttft_ms"][pct] if c else None
def measures(d):
    s = d["summary"]
    return [s["req_per_s"], ttft(s, "length", "short", "p50"), ttft(s, "sla", "gold", "p99"),
            ttft(s, "length", "long", "p50"), d["server_memory"]["peak_rss_bytes"] / 2**20,
            s["overall"]["tpot_ms"]["mean"]]
names = ["req/s", "short TTFT p50 ms", "gold TTFT p99 ms", "long TTFT p50 ms", "peak RSS MiB",
         "TPOT mean ms"]
goals = [(">=", 1.5), ("<=", 0.1), ("<=", 0.2), ("<=", 1.0), ("<=", 0.63), None]
print("\n| run | " + " | ".join(f"{n}: k25 / peer (ratio)" for n in names) + " |")
print("|---" * (len(names) + 1) + "|")
ratios = [[] for _ in names]
for r, suffix in enumerate(suffixes, 1):
    k, p = measures(load("k25", suffix)), measures(load("peer", suffix))
    cells = []
    for i, (a, b) in enumerate(zip(k, p)):
        if a is None or b is None or b == 0:
            cells.append("n/a")
            continue
        ratios[i].append(a / b)
        cells.append(f"{a:.3f} / {b:.3f} ({a / b:.3f})" if i == 0 else
                     f"{a:.0f} / {b:.0f} ({a / b:.3f})")
    print(f"| {r} | " + " | ".join(cells) + " |")
print("| median ratio | " + " | ".join(
    (f"{statistics.median(x):.3f}" if x else "n/a") + (f" (goal {g[0]} {g[1]})" if g else "")
    for x, g in zip(ratios, goals)) + " |")
PY
  fi
fi
