#!/usr/bin/env bash
# scripts/launch-multi.sh end to end: two real instances of one core each behind nginx on
# 127.0.0.1, a bench/bench_serve.py run of 40 streamed completions through the front port (all
# must succeed with exact token counts) and both instances must have served some; then SIGTERM
# must leave no process, port or run dir behind.
#   test_launch_multi.sh SLABSERVE_BINARY TESTDATA_DIR
# Exit 77 (skipped) without the model or nginx. Every wait is bounded.
set -uo pipefail
binary="$1"
model="$2/models/stories260K"
launcher="$(cd "$(dirname "$0")/../.." && pwd)/scripts/launch-multi.sh"

[ -f "$model/config.json" ] || { echo "SKIP: no model at $model"; exit 77; }
PATH="$PATH:/usr/sbin:/sbin" command -v nginx >/dev/null || { echo "SKIP: nginx is not installed"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }

work="$(mktemp -d)"
launcher_pid=""
fail() {
  echo "FAIL: $*"
  for f in "$work"/launcher.log "$work"/run/*.log; do [ -f "$f" ] && { echo "== $f"; tail -n 30 "$f"; }; done
  exit 1
}
finish() {
  # Only on failure paths: the launcher (and through it its children) must not outlive the test.
  if [ -n "$launcher_pid" ] && kill -0 "$launcher_pid" 2>/dev/null; then
    kill -TERM "$launcher_pid" 2>/dev/null
    sleep 5
    pkill -KILL -P "$launcher_pid" 2>/dev/null
    kill -KILL "$launcher_pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap finish EXIT

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# Three consecutive free ports: front, then base and base+1.
for _ in $(seq 50); do
  # Below Linux's ephemeral range (32768-60999): there, nginx's own upstream connections can take
  # an instance's port between this check and the instance's bind (seen: 1 run in 6).
  port=$((20000 + RANDOM % 12000))
  port_free "$port" && port_free $((port + 1)) && port_free $((port + 2)) && break
  port=""
done
[ -n "$port" ] || fail "no free ports"
base=$((port + 1))

"$launcher" --instances 2 --port "$port" --base-port "$base" --binary "$binary" --run-dir "$work/run" \
  --ready-timeout 120 -- --model "$model" --shutdown-timeout 10 >"$work/launcher.log" 2>&1 &
launcher_pid=$!

deadline=$((SECONDS + 150))
until curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$port/health"; do
  kill -0 "$launcher_pid" 2>/dev/null || fail "the launcher exited before it was ready"
  [ $SECONDS -lt $deadline ] || fail "not ready after 150 s"
  sleep 0.5
done
grep -q "ready: 2 instances" "$work/launcher.log" || sleep 1
children=$(pgrep -P "$launcher_pid" | tr '\n' ' ')
descendants="$children"
for pid in $children; do descendants+=" $(pgrep -P "$pid" | tr '\n' ' ')"; done  # nginx workers
echo "launcher $launcher_pid, children: $children"
[ "$(echo "$children" | wc -w)" -ge 3 ] || fail "expected 2 instances and nginx under the launcher, got: $children"

# The load: bench/bench_serve.py through the front port, 40 streamed completions 8 at a time so
# least_conn has concurrent work to spread; every one must succeed with its exact token count.
bench="$(dirname "$launcher")/../bench/bench_serve.py"
if ! timeout 300 python3 "$bench" --base-url "http://127.0.0.1:$port" --num-prompts 40 --max-concurrency 8 \
    --random-input-len 24 --random-output-len 16 --vocab-size 512 --request-timeout 60 \
    --save-result --result-dir "$work" --result-filename bench.json >"$work/bench.log" 2>&1; then
  cat "$work/bench.log"
  fail "bench_serve.py through nginx reported failures"
fi
python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); sys.exit(not (m["completed"] == 40 and m["failed"] == 0))' \
  "$work/bench.json" || { cat "$work/bench.log"; fail "bench_serve.py: not 40 completed"; }
grep -E "Successful requests|Output token throughput" "$work/bench.log"
echo "40 requests through nginx (bench_serve.py): all succeeded"

for i in 0 1; do
  served=$(curl -sf --max-time 5 "http://127.0.0.1:$((base + i))/metrics" |
    awk '/^vllm:request_success_total/ {s += $NF} END {print s + 0}')
  echo "instance $i served $served"
  [ "${served%.*}" -gt 0 ] || fail "instance $i served no request"
done

kill -TERM "$launcher_pid"
deadline=$((SECONDS + 60))
while kill -0 "$launcher_pid" 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || fail "the launcher still runs 60 s after SIGTERM"
  sleep 0.2
done
wait "$launcher_pid"
rc=$?
launcher_pid=""
[ "$rc" -eq 0 ] || fail "the launcher exited with $rc after SIGTERM"
for pid in $descendants; do
  kill -0 "$pid" 2>/dev/null && fail "process $pid outlived the launcher"
done
for p in "$port" "$base" $((base + 1)); do
  port_free "$p" || fail "port $p still open"
done
[ ! -e "$work/run" ] || fail "the run dir was left behind"
echo "PASS: stopped cleanly"
