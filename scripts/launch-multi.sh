#!/usr/bin/env bash
# Runs several slabserve instances on one machine, each pinned to its own cores and NUMA memory,
# behind one nginx port (docs/ARCHITECTURE.md "Deployment"). The partition comes from the binary itself
# (`slabserve topology --json`, hwloc); this script only applies it.
#
#   scripts/launch-multi.sh [options] [-- serve options...]
#     --layout FILE            read defaults from a configs/*.env file (flags given here win)
#     --instances N            default: one per NUMA node (or as many as --cores-per-instance fit)
#     --cores-per-instance K   compute cores per instance (default: its whole share)
#     --reserve-http-core      one more core per instance, for nginx, kept off the compute cpuset
#     --port P                 nginx port (default 8000); instance i listens on 127.0.0.1:BASE+i
#     --base-port B            default P+1
#     --host H                 nginx listen address (default 127.0.0.1)
#     --binary PATH            slabserve binary (default build/slabserve)
#     --run-dir DIR            logs, nginx config and pid files (default a fresh temp dir, removed
#                              on exit; a given DIR is created and removed likewise)
#     --ready-timeout S        seconds each instance may take to load (default 600)
#     --upstreams H:P,H:P,...  front only: no local instances, nginx balances over these (already
#                              running, on other hosts); each /health must answer 200 within
#                              --ready-timeout. Excludes the partition and binary options.
#     --prefix-affinity N      route by a consistent hash of the prompt's first N characters
#                              (completions: "prompt", string or token ids; chat: the first
#                              message's "content") instead of least_conn, so requests sharing a
#                              prefix reach the instance whose prefix cache holds it
#   Everything after -- goes to every `slabserve serve` (e.g. -- --model DIR --max-num-seqs 8).
#
# Pinning: each instance gets `--cpuset CPUS` (its pool: one thread per core) and, when its cores
# are on one node, `--numa-node N` (weights and KV cache bound there); the whole process (HTTP
# threads too) also runs under `numactl --physcpubind=CPUS --membind=NODES` when numactl is
# installed, else `taskset -c CPUS`.
# Ctrl-C / SIGTERM stops nginx and the instances (they drain first) and removes the run dir.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"

INSTANCES="" CORES_PER_INSTANCE="" RESERVE_HTTP_CORE=0 PORT=8000 BASE_PORT="" HOST=127.0.0.1
BINARY="$here/build/slabserve" RUN_DIR="" READY_TIMEOUT=600 STOP_TIMEOUT=60 SERVE_ARGS=()
UPSTREAMS="" PREFIX_AFFINITY="" LOCAL_ONLY_FLAGS=()

die() { echo "launch-multi: $*" >&2; exit 2; }
log() { echo "launch-multi: $*" >&2; }

# The layout file first, so that flags override it wherever they stand.
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [ "${args[i]}" = "--" ] && break
  if [ "${args[i]}" = "--layout" ]; then
    [ $((i + 1)) -lt ${#args[@]} ] || die "--layout needs a file"
    # shellcheck source=/dev/null
    source "${args[i + 1]}" || die "cannot read layout ${args[i + 1]}"
  fi
done
while [ $# -gt 0 ]; do
  case "$1" in
    --layout) shift ;;
    --instances) INSTANCES="$2"; LOCAL_ONLY_FLAGS+=("$1"); shift ;;
    --cores-per-instance) CORES_PER_INSTANCE="$2"; LOCAL_ONLY_FLAGS+=("$1"); shift ;;
    --reserve-http-core) RESERVE_HTTP_CORE=1; LOCAL_ONLY_FLAGS+=("$1") ;;
    --port) PORT="$2"; shift ;;
    --base-port) BASE_PORT="$2"; LOCAL_ONLY_FLAGS+=("$1"); shift ;;
    --host) HOST="$2"; shift ;;
    --binary) BINARY="$2"; LOCAL_ONLY_FLAGS+=("$1"); shift ;;
    --run-dir) RUN_DIR="$2"; shift ;;
    --ready-timeout) READY_TIMEOUT="$2"; shift ;;
    --upstreams) UPSTREAMS="$2"; shift ;;
    --prefix-affinity) PREFIX_AFFINITY="$2"; shift ;;
    --) shift; SERVE_ARGS+=("$@"); LOCAL_ONLY_FLAGS+=("serve options after --"); break ;;
    *) die "unknown argument '$1' (serve options go after --)" ;;
  esac
  shift
done
BASE_PORT="${BASE_PORT:-$((PORT + 1))}"
# The PCRE repeat count in the affinity regex is at most 65535.
if [ -n "$PREFIX_AFFINITY" ]; then
  [[ "$PREFIX_AFFINITY" =~ ^[0-9]+$ ]] && [ "$PREFIX_AFFINITY" -ge 1 ] && [ "$PREFIX_AFFINITY" -le 65535 ] ||
    die "--prefix-affinity takes a number of characters, 1 to 65535 (got '$PREFIX_AFFINITY')"
fi
remote=()   # host:port of each upstream in front-only mode
if [ -n "$UPSTREAMS" ]; then
  # Partition options (flags, or a layout file's variables) would have nothing to apply to.
  if [ ${#LOCAL_ONLY_FLAGS[@]} -eq 0 ] && { [ -n "$INSTANCES$CORES_PER_INSTANCE" ] || [ "$RESERVE_HTTP_CORE" = 1 ]; }; then
    LOCAL_ONLY_FLAGS+=("the layout's partition")
  fi
  [ ${#LOCAL_ONLY_FLAGS[@]} -eq 0 ] ||
    die "--upstreams fronts instances running elsewhere: ${LOCAL_ONLY_FLAGS[*]} would not be honoured"
  IFS=, read -r -a remote <<<"$UPSTREAMS"
  for u in "${remote[@]}"; do
    [[ "$u" =~ ^[A-Za-z0-9._-]+:[0-9]+$ || "$u" =~ ^\[[0-9A-Fa-f:.]+\]:[0-9]+$ ]] ||
      die "--upstreams: '$u' is not HOST:PORT"
  done
  [ ${#remote[@]} -gt 0 ] || die "--upstreams is empty"
fi

NGINX="$(PATH="$PATH:/usr/sbin:/sbin" command -v nginx || true)"
[ -n "$NGINX" ] || die "nginx is not installed (apt-get install nginx)"
command -v curl >/dev/null || die "curl is not installed"

plan=()     # local mode: one "cpus nodes http_cpu" line per instance
if [ ${#remote[@]} -eq 0 ]; then
  [ -x "$BINARY" ] || die "no slabserve binary at $BINARY (build it, or pass --binary)"
  command -v python3 >/dev/null || die "python3 is needed to read the partition JSON"
  topo_args=(topology --json)
  [ -n "$INSTANCES" ] && topo_args+=(--instances "$INSTANCES")
  [ -n "$CORES_PER_INSTANCE" ] && topo_args+=(--cores-per-instance "$CORES_PER_INSTANCE")
  [ "$RESERVE_HTTP_CORE" = 1 ] && topo_args+=(--reserve-http-core)
  topo_json="$("$BINARY" "${topo_args[@]}")" || die "no partition for this machine (see the error above)"
  mapfile -t plan < <(python3 -c '
import json, sys
for i in json.load(sys.stdin)["instances"]:
    print(i["cpus"], i["numa_nodes"], "-" if i["http_cpu"] is None else i["http_cpu"])
' <<<"$topo_json")
  [ ${#plan[@]} -gt 0 ] || die "the partition is empty"
fi

if [ -n "$RUN_DIR" ]; then
  mkdir -p "$RUN_DIR"
else
  RUN_DIR="$(mktemp -d "${TMPDIR:-/tmp}/slabserve-multi.XXXXXX")"
fi
# nginx workers drop to an unprivileged user when started as root; they must reach the dir.
chmod 755 "$RUN_DIR"

pids=()      # instance processes (numactl/taskset exec into slabserve: same pid)
nginx_pid=""
stopping=0
# shellcheck disable=SC2317  # reached through the traps below
cleanup() {
  [ "$stopping" = 1 ] && return
  stopping=1
  trap '' INT TERM
  log "stopping"
  if [ -n "$nginx_pid" ]; then kill -QUIT "$nginx_pid" 2>/dev/null || true; fi
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  # Instances drain their in-flight requests first; anything still alive after STOP_TIMEOUT is killed.
  local deadline=$((SECONDS + STOP_TIMEOUT))
  for pid in "${pids[@]}" $nginx_pid; do
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$RUN_DIR"
}
trap 'cleanup; exit 0' INT TERM
trap 'cleanup' EXIT

if command -v numactl >/dev/null; then pinning=numactl; else pinning=taskset; fi
http_cpus=()
targets=()   # host:port nginx balances over
for i in "${!plan[@]}"; do
  read -r cpus nodes http_cpu <<<"${plan[i]}"
  port=$((BASE_PORT + i))
  [ "$http_cpu" != "-" ] && http_cpus+=("$http_cpu")
  if [ "$pinning" = numactl ]; then
    pin=(numactl "--physcpubind=$cpus" "--membind=$nodes")
  else
    pin=(taskset -c "$cpus")
  fi
  log "instance $i: 127.0.0.1:$port on cpus $cpus, memory node(s) $nodes ($pinning), log $RUN_DIR/instance-$i.log"
  placement=(--cpuset "$cpus")
  [[ "$nodes" =~ ^[0-9]+$ ]] && placement+=(--numa-node "$nodes")
  "${pin[@]}" "$BINARY" serve --host 127.0.0.1 --port "$port" "${placement[@]}" "${SERVE_ARGS[@]}" \
    >"$RUN_DIR/instance-$i.log" 2>&1 &
  pids+=($!)
  targets+=("127.0.0.1:$port")
done
# Local instances: one that dies takes the launcher down, so nginx never marks them failed
# (max_fails=0). Remote ones: a connection error or timeout marks a host down for 10 s, during
# which requests go to the others; after it, one request probes it again (and is retried on the
# next host if the probe fails before the request was sent).
if [ ${#remote[@]} -gt 0 ]; then
  targets=("${remote[@]}")
  health="max_fails=1 fail_timeout=10s"
else
  health="max_fails=0"
fi

# Each instance loads its own weights copy; wait until every /health says 200.
for i in "${!targets[@]}"; do
  deadline=$((SECONDS + READY_TIMEOUT))
  until curl -sf -o /dev/null --max-time 2 "http://${targets[i]}/health"; do
    if [ ${#pids[@]} -gt 0 ] && ! kill -0 "${pids[i]}" 2>/dev/null; then
      tail -n 20 "$RUN_DIR/instance-$i.log" >&2
      die "instance $i exited while loading"
    fi
    [ $SECONDS -lt $deadline ] || die "${targets[i]}/health not ready after ${READY_TIMEOUT}s"
    sleep 0.5
  done
done

servers=""
for t in "${targets[@]}"; do servers+="    server $t $health;"$'\n'; done
# Balancing: least_conn, or with --prefix-affinity a consistent hash of the prompt's first
# characters, cut out of the request body by a regex map (stock nginx has no njs/lua). The body
# must be whole in memory when the upstream is chosen: proxy_request_buffering on reads it all
# before connecting, and client_body_buffer_size keeps bodies up to 1 MiB out of temp files.
# A body that does not match (larger, a chat content given as parts, no prompt) hashes on
# $request_id instead: spread at random.
balance="least_conn;" affinity_map="" request_buffering=off
if [ -n "$PREFIX_AFFINITY" ]; then
  n="$PREFIX_AFFINITY"
  balance="hash \$slab_affinity consistent;"
  request_buffering=on
  # A JSON string up to n characters (an escape counts as one; \x5c is the backslash, spelled
  # so that neither bash nor nginx unescapes it) or a token-id list up to n characters.
  str="\"(?:[^\"\\x5c]|\\x5c.){0,$n}"
  affinity_map="  map \$request_body \$slab_affinity {
    '~(?s)\"messages\"\\s*:\\s*\\[\\s*\\{[^{}]*?\"content\"\\s*:\\s*(?<slab_prefix>$str)' \$slab_prefix;
    '~(?s)\"prompt\"\\s*:\\s*(?<slab_prefix>$str|\\[[^\\]]{0,$n})' \$slab_prefix;
    default \$request_id;
  }
  client_body_buffer_size 1m;"
fi

# One nginx in front. Streaming-safe: no response buffering (SSE tokens pass as they come),
# HTTP/1.1 keep-alive to the instances, read timeouts as long as a long generation.
# proxy_next_upstream is nginx's default, said explicitly: a request goes to the next instance on
# a connection error or timeout only while nothing of it has been sent (no non_idempotent: a
# POST an instance has started generating for is never run twice).
mkdir -p "$RUN_DIR/nginx-temp"
cat >"$RUN_DIR/nginx.conf" <<EOF2
daemon off;
worker_processes ${#targets[@]};
pid $RUN_DIR/nginx.pid;
error_log $RUN_DIR/nginx-error.log warn;
events { worker_connections 4096; }
http {
  log_format slab '\$remote_addr [\$time_local] "\$request" \$status \$body_bytes_sent '
                  'upstream=\$upstream_addr upstream_status=\$upstream_status time=\$request_time';
  access_log $RUN_DIR/nginx-access.log slab;
  client_body_temp_path $RUN_DIR/nginx-temp/body;
  proxy_temp_path $RUN_DIR/nginx-temp/proxy;
  fastcgi_temp_path $RUN_DIR/nginx-temp/fastcgi;
  uwsgi_temp_path $RUN_DIR/nginx-temp/uwsgi;
  scgi_temp_path $RUN_DIR/nginx-temp/scgi;
$affinity_map
  upstream slabserve {
    # Shared by the workers: otherwise each keeps its own connection counts and failure marks.
    zone slabserve 1m;
    $balance
$servers    keepalive 64;
  }
  server {
    listen $HOST:$PORT;
    client_max_body_size 64m;
    location / {
      proxy_pass http://slabserve;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host \$host;
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
      proxy_buffering off;
      proxy_request_buffering $request_buffering;
      proxy_cache off;
      proxy_next_upstream error timeout;
      proxy_connect_timeout 5s;
      proxy_send_timeout 3600s;
      proxy_read_timeout 3600s;
    }
  }
}
EOF2
nginx_cmd=("$NGINX" -p "$RUN_DIR" -e "$RUN_DIR/nginx-error.log" -c "$RUN_DIR/nginx.conf")
# The front end on the reserved HTTP cores when there are any.
if [ ${#http_cpus[@]} -gt 0 ]; then
  nginx_cmd=(taskset -c "$(IFS=,; echo "${http_cpus[*]}")" "${nginx_cmd[@]}")
fi
"${nginx_cmd[@]}" -t -q || die "nginx rejects $RUN_DIR/nginx.conf"
"${nginx_cmd[@]}" &
nginx_pid=$!
front="$HOST"
case "$front" in 0.0.0.0 | "*" | "[::]") front=127.0.0.1 ;; esac
deadline=$((SECONDS + 30))
until curl -sf -o /dev/null --max-time 2 "http://$front:$PORT/health"; do
  kill -0 "$nginx_pid" 2>/dev/null || { cat "$RUN_DIR/nginx-error.log" >&2; die "nginx exited"; }
  [ $SECONDS -lt $deadline ] || die "nginx not answering on port $PORT"
  sleep 0.2
done
if [ ${#remote[@]} -gt 0 ]; then
  log "ready: nginx on http://$HOST:$PORT in front of ${#targets[@]} upstreams (Ctrl-C stops it)"
else
  log "ready: ${#pids[@]} instances behind http://$HOST:$PORT (Ctrl-C stops them)"
fi

# Runs until a signal, or until nginx or an instance dies, which takes the rest down too.
set +e
wait -n "${pids[@]}" "$nginx_pid"
rc=$?
log "a child exited (status $rc); stopping the rest"
exit 1
