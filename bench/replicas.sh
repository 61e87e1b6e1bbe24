#!/usr/bin/env bash
# Issue 19 benchmark: the sessions workload (bench/sessions.sh's shape) through HAProxy over two
# k25 replicas, with and without the shared Redis KV tier and session-affine routing:
#   single   one replica, no proxy (the baseline for (d))
#   a        leastconn (deploy/haproxy.cfg), no shared tier
#   b        session hash (deploy/haproxy-sessions.cfg), no shared tier
#   c        leastconn + Redis (flash_scheduler.l3_backend: redis)
#   d        session hash + Redis
#   e        (d) with replica 1 SIGKILLed once the first turns are done
#   a-kill   (a) with the same kill (what (e) is compared with)
# Prints follow-up TTFT p50 per case, the ratios against the goals, and from the replicas'
# /metrics the shared tier's read p99 and bytes read per follow-up. JSON and every replica's
# /metrics (NAME-r1.all.metrics: step times, budgets, server-side TTFT) under --out.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: bench/replicas.sh [--bin DIR] [--out DIR] [--sessions N] [--history N] [--turns N]
                         [--think-s S] [--concurrency N] [--threads N] (per replica)
                         [--single-threads N] (the single replica's; default 2 x --threads)
                         [--redis-maxmemory SIZE] [--runs LIST] (of single,a,b,c,d,e,a-kill)
                         [--server-args "ARGS"] (more k25-server flags for every replica,
                                                 e.g. "--target-step-ms 200")
USAGE
}

bin=build/bin
out=/tmp/k25-replicas
sessions=32
history=1000
turns=3
think=2
concurrency=4
threads=1
single_threads=""
maxmemory=2gb
runs=single,a,b,c,d,e,a-kill
turn_tokens=32
server_args=""
max_tokens=32
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --sessions) sessions="$2"; shift 2 ;;
    --history) history="$2"; shift 2 ;;
    --turns) turns="$2"; shift 2 ;;
    --think-s) think="$2"; shift 2 ;;
    --concurrency) concurrency="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --single-threads) single_threads="$2"; shift 2 ;;
    --redis-maxmemory) maxmemory="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --server-args) server_args="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
source "$(dirname "$0")/lib.sh"
here="$(cd "$(dirname "$0")/.." && pwd)"
model=$(bench_model "$bin" "$out" q8_0)
ctx=$(( history * 5 / 4 + turns * (turn_tokens + max_tokens + 16) + 64 ))
# L2 of each replica holds the whole workload (F16 KV, 12 KiB per token of the ~125M shape).
l2_mb=$(( sessions * (history * 5 / 4 + turns * (turn_tokens + max_tokens + 16)) * 12 / 1024 + 64 ))
wants() { [[ ",$runs," == *",$1,"* ]]; }
echo "== replicas: $sessions sessions x ~$history tokens, $turns turns, think ${think}s," \
  "concurrency $concurrency; 2 replicas x $threads thread(s), L2 ${l2_mb} MiB each;" \
  "server flags: ${server_args:-none};" \
  "Redis: maxmemory $maxmemory allkeys-lru, no persistence; load: $(cut -d' ' -f1-3 /proc/loadavg)"

pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done; }
trap cleanup EXIT

start_redis() {
  redis_port=$(free_port)
  mkdir -p "$out/redis"
  redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$out/redis" --maxmemory "$maxmemory" --maxmemory-policy allkeys-lru \
    --logfile "$out/redis/redis.log" &
  redis_pid=$!; pids+=("$redis_pid")
  for _ in $(seq 1 100); do redis-cli -p "$redis_port" ping 2> /dev/null | grep -q PONG && break; sleep 0.1; done
}

start_replica() {  # var-prefix threads [extra...]
  local name="$1" t="$2"; shift 2
  local port; port=$(free_port)
  "$bin/k25-server" --model "$model" --threads "$t" --port "$port" \
    --max-batch-size "$concurrency" --ctx-size "$ctx" --l2-cache-size-mb "$l2_mb" \
    --log-requests false $server_args "$@" > "$out/$name.log" 2>&1 &
  local pid=$!; pids+=("$pid")
  wait_ready "http://127.0.0.1:$port" "$pid"
  eval "${name}_port=$port ${name}_pid=$pid"
}

start_proxy() {  # cfg
  proxy_port=$(free_port)
  K25_LISTEN=127.0.0.1:$proxy_port K25_REPLICA_1=127.0.0.1:$r1_port \
    K25_REPLICA_2=127.0.0.1:$r2_port K25_STATS=127.0.0.1:$(free_port) \
    haproxy -db -f "$here/deploy/$1" > "$out/haproxy.log" 2>&1 &
  proxy_pid=$!; pids+=("$proxy_pid")
  wait_ready "http://127.0.0.1:$proxy_port" "$proxy_pid"
}

finished() {  # port: requests finished so far
  curl -s "http://127.0.0.1:$1/metrics" | awk '/^k25_requests_finished_total/ {n += $2} END {print n+0}'
}

bench() {  # name url
  "$bin/k25-bench" --url "$2" --workload sessions --sessions "$sessions" --turns "$turns" \
    --history-tokens "$history" --turn-tokens "$turn_tokens" --max-tokens "$max_tokens" \
    --concurrency "$concurrency" --think-time-s "$think" --tokenizer-model "$model" \
    --json "$out/$1.json" --timeout-s 900 --no-progress 2> /dev/null | grep -E '^throughput|turn=' || true
}

shared_metrics() {  # name port
  curl -s "http://127.0.0.1:$2/metrics" | grep -E '^k25_shared_kv_|^k25_cached_tokens_total' \
    > "$out/$1.metrics" || true
}

all_metrics() {  # name port: everything, for reading step times and budgets afterwards
  curl -s "http://127.0.0.1:$2/metrics" > "$out/$1.all.metrics" || true
}

run_case() {  # name cfg redis(0|1) kill(0|1)
  local name="$1" cfg="$2" redis="$3" kill="$4"
  echo "-- $name ($cfg, redis=$redis, kill=$kill)"
  local extra=()
  if [[ $redis == 1 ]]; then
    start_redis
    extra=(--l3-backend redis --redis-url "redis://127.0.0.1:$redis_port")
  fi
  start_replica r1 "$threads" "${extra[@]}"
  start_replica r2 "$threads" "${extra[@]}"
  start_proxy "$cfg"
  if [[ $kill == 1 ]]; then
    ( while (( $(finished "$r1_port") + $(finished "$r2_port") < sessions )); do sleep 0.2; done
      kill -9 "$r1_pid"; echo "   replica 1 killed after $sessions requests" ) &
    local watcher=$!
  fi
  bench "$name" "http://127.0.0.1:$proxy_port"
  [[ $kill == 1 ]] && wait "$watcher" 2> /dev/null || true
  kill -0 "$r1_pid" 2> /dev/null && all_metrics "$name-r1" "$r1_port"
  all_metrics "$name-r2" "$r2_port"
  if [[ $redis == 1 ]]; then
    kill -0 "$r1_pid" 2> /dev/null && shared_metrics "$name-r1" "$r1_port"
    shared_metrics "$name-r2" "$r2_port"
  fi
  cleanup; pids=()
  sleep 1
}

if wants single; then
  echo "-- single replica, ${single_threads:-$((threads * 2))} threads, no proxy"
  start_replica s "${single_threads:-$((threads * 2))}"
  bench single "http://127.0.0.1:$s_port"
  all_metrics single "$s_port"
  cleanup; pids=()
fi
wants a && run_case a haproxy.cfg 0 0
wants b && run_case b haproxy-sessions.cfg 0 0
wants c && run_case c haproxy.cfg 1 0
wants d && run_case d haproxy-sessions.cfg 1 0
wants e && run_case e haproxy-sessions.cfg 1 1
wants a-kill && run_case a-kill haproxy.cfg 0 1
trap - EXIT

python3 - "$out" "$sessions" "$turns" <<'PY'
import json, os, sys
out, sessions, turns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def follow(name):
    p = os.path.join(out, name + ".json")
    if not os.path.exists(p): return None
    d = json.load(open(p))
    s = d["summary"]
    c = s["by_class"]["turn"]["follow_up"]
    return {"p50": c["ttft_ms"]["p50"], "p99": c["ttft_ms"].get("p99", float("nan")),
            "req_s": s["req_per_s"], "errors": s["overall"]["failed"]}
def metrics(name):
    m = {}
    for r in ("r1", "r2"):
        p = os.path.join(out, f"{name}-{r}.metrics")
        if not os.path.exists(p): continue
        for line in open(p):
            k, v = line.rsplit(" ", 1)
            if "quantile" in k: m[k] = max(m.get(k, 0), float(v))
            else: m[k] = m.get(k, 0) + float(v)
    return m
rows = {}
print("| case | follow-up TTFT p50 ms | p99 ms | req/s | errors | Redis read p99 ms | Redis bytes in per follow-up |")
print("|---|---|---|---|---|---|---|")
for name in ["single", "a", "b", "c", "d", "e", "a-kill"]:
    r = follow(name)
    if not r: continue
    rows[name] = r
    m = metrics(name)
    p99 = m.get('k25_shared_kv_read_latency_seconds{quantile="0.99"}')
    bytes_in = m.get("k25_shared_kv_bytes_in_total")
    per = bytes_in / (sessions * (turns - 1)) if bytes_in is not None else None
    print(f"| {name} | {r['p50']:.0f} | {r['p99']:.0f} | {r['req_s']:.3f} | {r['errors']} | "
          f"{'' if p99 is None else f'{p99 * 1000:.2f}'} | {'' if per is None else f'{per / 2**20:.2f} MiB'} |")
g = lambda k: rows.get(k, {}).get("p50")
if g("d") and g("single"): print(f"(d)/single: {g('d') / g('single'):.2f} (goal <= 1.2)")
if g("d") and g("a"): print(f"(d)/(a): {g('d') / g('a'):.3f} (goal <= 0.2)")
if g("e") and g("a-kill"): print(f"(e)/(a with the same kill): {g('e') / g('a-kill'):.3f} (goal <= 0.3)")
PY
