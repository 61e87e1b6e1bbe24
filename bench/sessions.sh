#!/usr/bin/env bash
# Issue 5 benchmarks: multi-turn sessions whose KV does not fit in RAM, k25 against llama.cpp's
# llama-server on the same model file and threads (k25-mkmodel --shape llama-125m, Q8_0).
#   1. `k25-bench --workload sessions --think-time-s T`: every session resends its growing
#      conversation; during a user's think time other sessions run, so the KV of all sessions
#      competes for memory. k25's L2 budget and the peer's RAM prompt cache (--cache-ram) get the
#      same number of MiB, a fraction (--l2-fraction, default 0.25) of the sessions' KV in F32;
#      k25 spills to L3 (a directory under --out). Also k25 with an L2 holding everything.
#   2. Restart: the first turns only, the server restarted, the same first turns again: k25 finds
#      them in L3, the peer starts cold.
# Prints follow-up TTFT p50, req/s and peak RSS per server and the ratios; JSON under --out.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: bench/sessions.sh [--bin DIR] [--peer DIR] [--out DIR] [--sessions N] [--history N]
                         [--turns N] [--think-s S] [--concurrency N] [--l2-fraction F]
                         [--l3-idle-s S]   (k25's l3_idle_seconds; default: the server's, 60)
                         [--k25-l2-mb MB]  (k25's constrained L2; default: the peer's cache)
                         [--kv-dtype f32|f16] (k25's KV element type; default: the server's)
                         [--runs LIST]     (of full,l3,l3-noprefetch,peer,restart;
                                            default: full,l3,peer,restart)
USAGE
}

bin=build/bin
peer=../peer/llama.cpp/build/bin
out=/tmp/k25-bench
threads=2
sessions=32
history=1000
turns=3
think=2
concurrency=4
fraction=0.25
idle=()
kv_dtype=()
k25_l2_mb=
runs=full,l3,peer,restart
turn_tokens=32
max_tokens=32
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --peer) peer="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --sessions) sessions="$2"; shift 2 ;;
    --history) history="$2"; shift 2 ;;
    --turns) turns="$2"; shift 2 ;;
    --think-s) think="$2"; shift 2 ;;
    --concurrency) concurrency="$2"; shift 2 ;;
    --l2-fraction) fraction="$2"; shift 2 ;;
    --l3-idle-s) idle=(--l3-idle-seconds "$2"); shift 2 ;;
    --kv-dtype) kv_dtype=(--kv-cache-dtype "$2"); shift 2 ;;
    --k25-l2-mb) k25_l2_mb="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
source "$(dirname "$0")/lib.sh"

model=$(bench_model "$bin" "$out" q8_0)
have_peer=0
[[ -x "$peer/llama-server" ]] && have_peer=1 || echo "peer not found in $peer: k25 only" >&2

# KV of the whole workload: tokens per session (history + turns of user line and answer) times
# 24 KiB per token (12 layers x K and V x 256 floats x 4 bytes).
ctx=$(( history * 5 / 4 + turns * (turn_tokens + max_tokens + 16) + 64 ))
workload_mb=$(( sessions * (history + turns * (turn_tokens + max_tokens)) * 24 / 1024 ))
l2_mb=$(python3 -c "print(max(64, int($workload_mb * $fraction)))")
k25_l2_mb=${k25_l2_mb:-$l2_mb}
wants() { [[ ",$runs," == *",$1,"* ]]; }
echo "== sessions: $sessions x ~$history tokens of history, $turns turns, think ${think}s," \
  "concurrency $concurrency; workload KV ~${workload_mb} MiB, constrained L2 ${k25_l2_mb} MiB," \
  "peer cache ${l2_mb} MiB"

bench() {  # name url pid turns
  "$bin/k25-bench" --url "$2" --workload sessions --sessions "$sessions" --turns "$4" \
    --history-tokens "$history" --turn-tokens "$turn_tokens" --max-tokens "$max_tokens" \
    --concurrency "$concurrency" --think-time-s "$think" --server-pid "$3" \
    --tokenizer-model "$model" --json "$out/$1.json" --timeout-s 900 2> /dev/null \
    | grep -E '^throughput|^overall|turn='
}

start_k25() {  # log l2_mb [extra args...]
  local log="$1" mb="$2"; shift 2
  port=$(free_port)
  "$bin/k25-server" --model "$model" --threads "$threads" --port "$port" \
    --max-batch-size "$concurrency" --ctx-size "$ctx" --l2-cache-size-mb "$mb" \
    --log-requests false "${kv_dtype[@]}" "$@" > "$out/$log" 2>&1 &
  pid=$!
  wait_ready "http://127.0.0.1:$port" "$pid"
}

start_peer() {  # log
  port=$(free_port)
  "$peer/llama-server" -m "$model" -t "$threads" -np "$concurrency" -c $((concurrency * ctx)) \
    --cache-ram "$l2_mb" --port "$port" --host 127.0.0.1 > "$out/$1" 2>&1 &
  pid=$!
  wait_ready "http://127.0.0.1:$port" "$pid"
}

stop() { kill "$pid" 2> /dev/null || true; wait "$pid" 2> /dev/null || true; }
l3="$out/sessions-l3"
pid=
# The L3 data file reserves its whole capacity on disk (l3_cache_size_gb, 4 GiB): removed at the
# end however the script ends, so repeated runs do not fill the disk.
trap 'kill $pid 2> /dev/null || true; rm -rf "$l3"' EXIT

if wants full; then
  echo "-- k25, L2 holds everything ($((workload_mb * 2)) MiB)"
  start_k25 k25-sessions-full.log $((workload_mb * 2))
  bench k25-sessions-full "http://127.0.0.1:$port" "$pid" "$turns"
  stop
fi
if wants l3; then
  echo "-- k25, L2 ${k25_l2_mb} MiB + L3"
  rm -rf "$l3"; mkdir -p "$l3"
  start_k25 k25-sessions-l3.log "$k25_l2_mb" --l3-enabled true --l3-device "$l3" "${idle[@]}"
  bench k25-sessions-l3 "http://127.0.0.1:$port" "$pid" "$turns"
  curl -s "http://127.0.0.1:$port/metrics" | grep -E '^flash_l[23]_|^flash_prefix|^k25_kv_pages' || true
  stop
fi
if wants l3-noprefetch; then
  echo "-- k25, L2 ${k25_l2_mb} MiB + L3, session prefetch off (--l3-prefetcher none)"
  rm -rf "$l3"; mkdir -p "$l3"
  start_k25 k25-sessions-l3-noprefetch.log "$k25_l2_mb" --l3-enabled true --l3-device "$l3" \
    --l3-prefetcher none "${idle[@]}"
  bench k25-sessions-l3-noprefetch "http://127.0.0.1:$port" "$pid" "$turns"
  curl -s "http://127.0.0.1:$port/metrics" | grep -E '^flash_l[23]_|^flash_prefix|^k25_kv_pages' || true
  stop
fi
if [[ $have_peer == 1 ]] && wants peer; then
  echo "-- llama.cpp, --cache-ram ${l2_mb}"
  start_peer peer-sessions.log
  bench peer-sessions "http://127.0.0.1:$port" "$pid" "$turns"
  stop
fi

if wants restart; then
  echo "== restart: first turns, server restarted, the same first turns again"
  rm -rf "$l3"; mkdir -p "$l3"
  start_k25 k25-restart.log "$k25_l2_mb" --l3-enabled true --l3-device "$l3"
  bench k25-restart-before "http://127.0.0.1:$port" "$pid" 1
  stop
  start_k25 k25-restart.log "$k25_l2_mb" --l3-enabled true --l3-device "$l3"
  bench k25-restart-after "http://127.0.0.1:$port" "$pid" 1
  stop
fi
if [[ $have_peer == 1 ]] && wants restart; then
  start_peer peer-restart.log
  bench peer-restart-before "http://127.0.0.1:$port" "$pid" 1
  stop
  start_peer peer-restart.log
  bench peer-restart-after "http://127.0.0.1:$port" "$pid" 1
  stop
fi
trap - EXIT
rm -rf "$l3"

python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
def load(name):
    p = os.path.join(out, name + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
def row(name, cls):
    d = load(name)
    if d is None: return None
    s = d["summary"]
    c = s["by_class"]["turn"][cls] if cls else s["overall"]
    return {"ttft_p50": c["ttft_ms"]["p50"], "req_s": s["req_per_s"],
            "rss_mib": d["server_memory"]["peak_rss_bytes"] / 2**20}
print("| run | follow-up TTFT p50 ms | req/s | peak RSS MiB |\n|---|---|---|---|")
rows = {}
for name in ["k25-sessions-full", "k25-sessions-l3", "k25-sessions-l3-noprefetch", "peer-sessions"]:
    r = row(name, "follow_up")
    if r:
        rows[name] = r
        print(f"| {name} | {r['ttft_p50']:.0f} | {r['req_s']:.3f} | {r['rss_mib']:.0f} |")
for name in ["k25-restart-after", "peer-restart-after"]:
    r = row(name, None)
    if r:
        rows[name] = r
        print(f"| {name} (first turn after restart) | {r['ttft_p50']:.0f} | {r['req_s']:.3f} | {r['rss_mib']:.0f} |")
k, p = rows.get("k25-sessions-l3"), rows.get("peer-sessions")
if k and p:
    print(f"k25/peer: follow-up TTFT p50 {k['ttft_p50'] / p['ttft_p50']:.3f} (goal <= 0.3), "
          f"req/s {k['req_s'] / p['req_s']:.2f} (goal >= 2.4), peak RSS {k['rss_mib'] / p['rss_mib']:.2f} (goal <= 0.63)")
f = rows.get("k25-sessions-full")
if k and f:
    print(f"k25 L2 {'constrained'} vs everything in L2: req/s {k['req_s'] / f['req_s']:.2f} (goal >= 0.8)")
k, n = rows.get("k25-sessions-l3"), rows.get("k25-sessions-l3-noprefetch")
if k and n:
    print(f"session prefetch on/off: follow-up TTFT p50 {k['ttft_p50'] / n['ttft_p50']:.3f}, "
          f"req/s {k['req_s'] / n['req_s']:.2f}, peak RSS {k['rss_mib'] / n['rss_mib']:.2f}")
k, p = rows.get("k25-restart-after"), rows.get("peer-restart-after")
if k and p:
    print(f"after restart, k25/peer TTFT p50: {k['ttft_p50'] / p['ttft_p50']:.3f} (goal <= 0.2)")
PY
