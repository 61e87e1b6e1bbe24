#!/usr/bin/env bash
# Issue 18 soak benchmark (not a test): one k25-server under mixed load for --minutes (default 10):
#   - bimodal requests (k25-bench, --scale 0.03 so the long class fits stories260K's 512-token
#     context; SLA mix, sampled), cut off at each round's deadline
#     (cancellations), rounds of --round-s seconds;
#   - multi-turn sessions (k25-bench --workload sessions) beside them, with L3 on;
#   - clients that disconnect mid-stream (curl with a short --max-time) in a loop.
# The server's max_queue is small so it sheds load with 429s of its own choosing. Every 5 s the
# script samples the server's VmRSS and open fds. At the end it prints: requests, errors other
# than 429s and cancellations (with their messages), the RSS slope after warm-up (least squares
# over the samples after --warmup-s), and the fd count before the load, at its end and after idling.
#   bench/soak.sh [--bin DIR] [--model GGUF] [--out DIR] [--minutes M] [--warmup-s S]
#                 [--round-s S] [--threads N] [--l3-gb G]
set -euo pipefail

bin=build/bin
model=../shared/models/stories260K.gguf
out=/tmp/k25-soak
minutes=10
warmup=120
round=60
threads=2
l3_gb=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --minutes) minutes="$2"; shift 2 ;;
    --warmup-s) warmup="$2"; shift 2 ;;
    --round-s) round="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --l3-gb) l3_gb="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
source "$(dirname "$0")/lib.sh"
[[ -f "$model" ]] || { echo "model not found: $model" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out/reports"
port=$(free_port)
url="http://127.0.0.1:$port"

"$bin/k25-server" --model "$model" --host 127.0.0.1 --port "$port" --threads "$threads" \
  --max-queue 8 --l3-enabled true --l3-device "$out/l3.bin" --l3-cache-size-gb "$l3_gb" \
  --l3-idle-seconds 5 > "$out/server.log" 2>&1 &
server=$!
trap 'kill $(jobs -p) 2> /dev/null || true; wait 2> /dev/null || true' EXIT
wait_ready "$url" "$server"

# elapsed_s rss_kib fds l3_pages prefix_cache_pages: the KV tiers' indexes grow until their
# budgets are full, so their page counts tell growth by design from a leak.
sample() {
  local rss fds metrics
  rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$server/status")
  fds=$(ls "/proc/$server/fd" | wc -l)
  metrics=$(curl -s --max-time 2 "$url/metrics" || true)
  echo "$1 $rss $fds $(metric flash_l3_pages <<< "$metrics") $(metric 'flash_prefix_cache_pages{state="all"}' <<< "$metrics")"
}
metric() { awk -v name="$1" '$1 == name { value = $2 } END { print value == "" ? 0 : value }'; }
fds_before=$(ls "/proc/$server/fd" | wc -l)
start=$(date +%s)
deadline=$((start + minutes * 60))
elapsed() { echo $(($(date +%s) - start)); }

( while (($(date +%s) < deadline)); do sample "$(elapsed)" >> "$out/samples.txt"; sleep 5; done ) &

bench_loop() {  # name, then k25-bench arguments
  local name=$1 n=0
  shift
  while (($(date +%s) + 10 < deadline)); do
    local left=$((deadline - $(date +%s)))
    "$bin/k25-bench" --url "$url" --no-progress --duration $((left < round ? left : round)) \
      --cancel-at-deadline --timeout-s 120 --tokenizer-model "$model" --json "$out/reports/$name-$n.json" "$@" \
      > "$out/reports/$name-$n.txt" 2>&1 || true
    n=$((n + 1))
  done
}
bench_loop bimodal --workload bimodal --scale 0.03 --requests 100000 --concurrency 10 \
  --max-tokens 48 --sla-mix 0.2/0.3/0.5 --temperature 0.8 &
bench_loop sessions --workload sessions --sessions 1000 --turns 3 --history-tokens 250 \
  --turn-tokens 32 --max-tokens 32 --concurrency 3 --think-time-s 1 &
# Clients that hang up mid-stream: the server must cancel their requests and free their state.
(
  disconnects=0
  while (($(date +%s) + 5 < deadline)); do
    curl -s -N --max-time 0.4 "$url/v1/completions" -H 'content-type: application/json' \
      -d '{"prompt":"Once upon a time","max_tokens":200,"stream":true,"ignore_eos":true}' \
      > /dev/null 2>&1 || true
    disconnects=$((disconnects + 1))
  done
  echo "$disconnects" > "$out/disconnects.txt"
) &

# Progress while it runs.
while (($(date +%s) < deadline)); do
  sleep 30
  echo "soak: $(elapsed) s of $((minutes * 60)); $(tail -1 "$out/samples.txt" 2> /dev/null |
    awk '{ printf "RSS %.1f MiB, %d fds", $2 / 1024, $3 }')" >&2
done
wait $(jobs -p | grep -v "^$server$") 2> /dev/null || true
fds_end=$(ls "/proc/$server/fd" | wc -l)
sleep 10
fds_idle=$(ls "/proc/$server/fd" | wc -l)
kill -0 "$server" || { echo "soak: the server died" >&2; exit 1; }

python3 - "$out" "$warmup" "$fds_before" "$fds_end" "$fds_idle" <<'PY'
import glob, json, sys
out, warmup, fds_before, fds_end, fds_idle = sys.argv[1], float(sys.argv[2]), *sys.argv[3:]
total = ok = cancelled = shed = 0
errors = {}
for path in sorted(glob.glob(out + "/reports/*.json")):
    for r in json.load(open(path))["requests"]:
        total += 1
        if r["ok"]:
            ok += 1
        elif r["cancelled"]:
            cancelled += 1
        elif r["http_status"] == 429:
            shed += 1
        else:
            message = r.get("error", "status %d" % r["http_status"])
            errors[message] = errors.get(message, 0) + 1
samples = [tuple(map(float, line.split())) for line in open(out + "/samples.txt")]
late = [(t, rss) for t, rss, *_ in samples if t >= warmup]
slope = float("nan")
if len(late) >= 2:
    mt = sum(t for t, _ in late) / len(late)
    mr = sum(r for _, r in late) / len(late)
    slope = sum((t - mt) * (r - mr) for t, r in late) / sum((t - mt) ** 2 for t, _ in late)
rss = [r for _, r, *_ in samples]
at_warmup = next(s for s in samples if s[0] >= warmup)
disconnects = open(out + "/disconnects.txt").read().strip()
print(f"requests {total}: ok {ok}, cancelled at deadline {cancelled}, 429 {shed}, "
      f"other errors {sum(errors.values())}; mid-stream disconnects {disconnects}")
for message, count in sorted(errors.items(), key=lambda e: -e[1]):
    print(f"  {count} x {message}")
print(f"RSS: {rss[0] / 1024:.1f} MiB at start, peak {max(rss) / 1024:.1f} MiB, "
      f"{rss[-1] / 1024:.1f} MiB at end; slope after {warmup:.0f} s: "
      f"{slope * 60 / 1024:+.3f} MiB/min over {len(late)} samples")
print(f"KV pages: L3 {at_warmup[3]:.0f} after warm-up, {samples[-1][3]:.0f} at end; "
      f"prefix cache {at_warmup[4]:.0f} after warm-up, {samples[-1][4]:.0f} at end")
print(f"fds: {fds_before} before the load, {fds_end} at its end, {fds_idle} after 10 s idle")
PY
