#!/usr/bin/env bash
# scripts/launch-multi.sh --upstreams end to end across three "hosts": network namespaces joined
# to the root namespace by veth pairs, one slabserve on stories260K in each, listening on its
# namespace's address; nginx in the root namespace in front (issue #17).
#   1. least_conn: 30 streamed completions (bench/bench_serve.py), all with exact token counts,
#      every host served some (its /metrics).
#   2. --prefix-affinity 24: 10 requests sharing a 24-character prefix (completions, chat, bodies
#      sent after the head) all reach one host (nginx access log); 12 different prefixes reach
#      more than one, and so do 12 requests without a body (the $request_id fallback).
#   3. a host SIGKILLed while 200 streams run 6 at a time: at most the 6 in flight fail, the rest
#      succeed on the two others, and so do 12 requests after it.
#   test_multi_host.sh SLABSERVE_BINARY TESTDATA_DIR
# Exit 77 (skipped) without root, ip netns, nginx or the model. Every wait is bounded; namespaces,
# veths, processes and the temp dir go on every exit path.
set -uo pipefail
binary="$1"
model="$2/models/stories260K"
root="$(cd "$(dirname "$0")/../.." && pwd)"
launcher="$root/scripts/launch-multi.sh"
bench="$root/bench/bench_serve.py"
export PATH="$PATH:/usr/sbin:/sbin"

[ -f "$model/config.json" ] || { echo "SKIP: no model at $model"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root for ip netns"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: ip (iproute2) is not installed"; exit 77; }
command -v nginx >/dev/null || { echo "SKIP: nginx is not installed"; exit 77; }
for tool in curl python3; do command -v $tool >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }; done

tag="smh$$"                          # namespace and veth names unique to this run
# 198.18.0.0/15 is reserved for network tests (RFC 2544): no real route of the machine's to hijack.
net="198.$((18 + $$ % 2)).$(($$ % 256))"     # a /24 of it, one /30 per host
hosts=(0 1 2)
work="$(mktemp -d)"
chmod 755 "$work"
server_pids=() launcher_pid=""

ns() { echo "$tag-$1"; }
host_ip() { echo "$net.$(($1 * 4 + 2))"; }
# shellcheck disable=SC2317  # reached through the trap
finish() {
  if [ -n "$launcher_pid" ]; then
    kill -TERM "$launcher_pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$launcher_pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$launcher_pid" 2>/dev/null
  fi
  for pid in "${server_pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  for h in "${hosts[@]}"; do
    ip netns pids "$(ns "$h")" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
    ip link del "$tag-v$h" 2>/dev/null          # removes its peer in the namespace too
    ip netns del "$(ns "$h")" 2>/dev/null
  done
  rm -rf "$work"
}
trap finish EXIT
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.log "$work"/run/*.log; do [ -f "$f" ] && { echo "== $f"; tail -n 20 "$f"; }; done
  exit 1
}

ip -4 addr | grep -q " $net\." && { echo "SKIP: $net.0/24 is already in use here"; exit 77; }
ip netns add "$tag-probe" 2>/dev/null || { echo "SKIP: cannot create network namespaces (no CAP_SYS_ADMIN?)"; exit 77; }
ip netns del "$tag-probe"

for h in "${hosts[@]}"; do
  ip netns add "$(ns "$h")" || fail "ip netns add"
  ip link add "$tag-v$h" type veth peer name eth0 netns "$(ns "$h")" || fail "ip link add veth"
  ip addr add "$net.$((h * 4 + 1))/30" dev "$tag-v$h" && ip link set "$tag-v$h" up || fail "root side of veth $h"
  ip -n "$(ns "$h")" addr add "$(host_ip "$h")/30" dev eth0 && ip -n "$(ns "$h")" link set eth0 up &&
    ip -n "$(ns "$h")" link set lo up || fail "namespace side of veth $h"
  ip netns exec "$(ns "$h")" "$binary" serve --model "$model" --host "$(host_ip "$h")" --port 8000 \
    --threads 1 --chat-template chatml >"$work/host-$h.log" 2>&1 &
  server_pids+=($!)
done
upstreams="$(host_ip 0):8000,$(host_ip 1):8000,$(host_ip 2):8000"

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for _ in $(seq 50); do
  port=$((20000 + RANDOM % 12000))
  port_free "$port" && break
  port=""
done
[ -n "$port" ] || fail "no free port"
front="http://127.0.0.1:$port"

# Starts the front (the launcher polls every host's /health first) and waits for it.
start_front() {
  # Emptied here, not only by the launcher's redirection: the background launcher may open the
  # file after the wait below first reads it, which would find the previous front's "ready".
  : >"$work/launcher.log"
  "$launcher" --upstreams "$upstreams" --port "$port" --run-dir "$work/run" --ready-timeout 60 "$@" \
    >"$work/launcher.log" 2>&1 &
  launcher_pid=$!
  local deadline=$((SECONDS + 70))
  until grep -q "ready: nginx" "$work/launcher.log"; do
    kill -0 "$launcher_pid" 2>/dev/null || fail "the launcher exited before it was ready"
    [ $SECONDS -lt $deadline ] || fail "front not ready after 70 s"
    sleep 0.2
  done
}
stop_front() {
  kill -TERM "$launcher_pid"
  local deadline=$((SECONDS + 20))
  while kill -0 "$launcher_pid" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || fail "the launcher still runs 20 s after SIGTERM"
    sleep 0.2
  done
  wait "$launcher_pid" || fail "the launcher exited with $? after SIGTERM"
  launcher_pid=""
  port_free "$port" || fail "port $port still open after the launcher stopped"
}
# bench NAME N CONCURRENCY OUTPUT_LEN [bench_serve.py options]: a run through the front; prints
# "completed failed".
bench() {
  timeout 120 python3 "$bench" --base-url "$front" --num-prompts "$2" --max-concurrency "$3" \
    --random-input-len 16 --random-output-len "$4" --vocab-size 512 --request-timeout 60 "${@:5}" \
    --save-result --result-dir "$work" --result-filename "$1.json" >"$work/$1.log" 2>&1
  python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); print(m["completed"], m["failed"])' \
    "$work/$1.json" || fail "$1: no result from bench_serve.py"
}
served() {
  curl -sf --max-time 5 "http://$(host_ip "$1"):8000/metrics" |
    awk '/^vllm:request_success_total/ {s += $NF} END {printf "%d\n", s}'
}

# 1. least_conn over the three hosts.
start_front
read -r completed failed < <(bench least_conn 30 6 8)
[ "$completed" = 30 ] && [ "$failed" = 0 ] || { cat "$work/least_conn.log"; fail "least_conn: $completed completed, $failed failed of 30"; }
for h in "${hosts[@]}"; do
  n="$(served "$h")"
  echo "host $h ($(host_ip "$h")) served $n"
  [ "${n:-0}" -gt 0 ] || fail "host $h served no request"
done
echo "PASS: 30 requests through nginx over 3 namespaces, all hosts used"
stop_front

# 2. Prefix affinity: the upstream of each POST, from the access log, in order.
start_front --prefix-affinity 24
# post PATH BODY [curl options]
post() {
  curl -sf --max-time 30 -H 'Content-Type: application/json' "${@:3}" -d "$2" "$front/v1/$1" -o /dev/null ||
    fail "POST /v1/$1 ${2:0:80} failed"
}
# upstreams_used [REQUEST]: "count address" per upstream of the logged requests starting with REQUEST.
upstreams_used() {
  grep "\"${1:-POST }" "$work/run/nginx-access.log" | sed -n 's/.*upstream=\([^ ]*\).*/\1/p' | sort | uniq -c
}
shared="Once upon a time, there "    # 24 characters
for i in 1 2 3 4; do
  post completions "{\"prompt\": \"${shared}was a cat number $i\", \"max_tokens\": 2}"
  post chat/completions "{\"messages\": [{\"role\": \"user\", \"content\": \"${shared}lived dog $i\"}], \"max_tokens\": 2}"
done
# Bodies that reach nginx after the request head (Expect: 100-continue: curl waits for nginx's
# go-ahead) must be keyed all the same: nginx reads the whole body before it picks the upstream.
long="$(printf 'a story %.0s' $(seq 10))"
for i in 1 2; do
  post completions "{\"prompt\": \"${shared}$long $i\", \"max_tokens\": 2}" -H 'Expect: 100-continue'
done
echo "same prefix:"; upstreams_used
same="$(upstreams_used)"
# The completions and chat keys are the same 24 characters: one upstream for all ten.
[ "$(echo "$same" | wc -l)" = 1 ] && [ "$(echo "$same" | awk '{print $1}')" = 10 ] ||
  fail "10 requests sharing a prefix went to more than one host: $same"
: >"$work/run/nginx-access.log"
for i in $(seq 12); do
  post completions "{\"prompt\": \"$i$i$i different story $i starts here and goes on\", \"max_tokens\": 2}"
done
echo "different prefixes:"; upstreams_used
[ "$(upstreams_used | wc -l)" -ge 2 ] || fail "12 different prefixes all went to one host"
# No prompt to key on (here: no body at all) hashes on $request_id: spread, not all on one host.
: >"$work/run/nginx-access.log"
for _ in $(seq 12); do curl -sf --max-time 10 "$front/v1/models" -o /dev/null || fail "GET /v1/models failed"; done
echo "no body:"; upstreams_used "GET /v1/models"
[ "$(upstreams_used "GET /v1/models" | wc -l)" -ge 2 ] ||
  fail "12 requests without a prompt all went to one host"
echo "PASS: prefix affinity"
stop_front

# 3. A host killed mid-run: 200 streams of 480 tokens, 6 at a time (a few seconds: each host has
# about two in flight at any time); host 2 SIGKILLed after 1 s.
start_front
bench killed 200 6 480 >"$work/killed.counts" &
bench_pid=$!
sleep 1
kill -0 "$bench_pid" 2>/dev/null || fail "the load finished before the kill: make it longer"
kill -KILL "${server_pids[2]}"
wait "${server_pids[2]}" 2>/dev/null
echo "host 2 killed"
wait "$bench_pid"   # bounded: bench() runs bench_serve.py under `timeout 120`
read -r completed failed <"$work/killed.counts" || fail "no result from the load"
echo "during the kill: $completed completed, $failed failed"
[ "$((completed + failed))" = 200 ] || fail "the load lost requests: $completed + $failed != 200"
[ "$failed" -le 6 ] || fail "$failed failed: more than the 6 that could be in flight on the killed host"
# nginx logs each broken or refused upstream connection: all must be host 2's.
errors="$(grep -c '\[error\]' "$work/run/nginx-error.log")"
others="$(grep '\[error\]' "$work/run/nginx-error.log" | grep -vc "upstream: \"http://$(host_ip 2):8000")"
echo "nginx upstream errors: $errors, $others of them not on host 2"
[ "$others" = 0 ] || { grep "\[error\]" "$work/run/nginx-error.log"; fail "upstream errors on hosts that were not killed"; }
read -r completed failed < <(bench after 12 4 8)
[ "$completed" = 12 ] && [ "$failed" = 0 ] || { cat "$work/after.log"; fail "after the kill: $completed completed, $failed failed of 12"; }
echo "PASS: after the kill, 12 of 12 succeeded on the remaining hosts"
stop_front
echo "PASS"
