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
    --instances) INSTANCES="$2"; shift ;;
    --cores-per-instance) CORES_PER_INSTANCE="$2"; shift ;;
    --reserve-http-core) RESERVE_HTTP_CORE=1 ;;
    --port) PORT="$2"; shift ;;
    --base-port) BASE_PORT="$2"; shift ;;
    --host) HOST="$2"; shift ;;
    --binary) BINARY="$2"; shift ;;
    --run-dir) RUN_DIR="$2"; shift ;;
    --ready-timeout) READY_TIMEOUT="$2"; shift ;;
    --) shift; SERVE_ARGS+=("$@"); break ;;
    *) die "unknown argument '$1' (serve options go after --)" ;;
  esac
  shift
done
BASE_PORT="${BASE_PORT:-$((PORT + 1))}"

[ -x "$BINARY" ] || die "no slabserve binary at $BINARY (build it, or pass --binary)"
NGINX="$(PATH="$PATH:/usr/sbin:/sbin" command -v nginx || true)"
[ -n "$NGINX" ] || die "nginx is not installed (apt-get install nginx)"
command -v curl >/dev/null || die "curl is not installed"
command -v python3 >/dev/null || die "python3 is needed to read the partition JSON"

# The partition, one "cpus nodes http_cpu" line per instance.
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
servers=""
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
  servers+="    server 127.0.0.1:$port max_fails=0;"$'\n'
done

# Each instance loads its own weights copy; wait until every /health says 200.
for i in "${!pids[@]}"; do
  port=$((BASE_PORT + i))
  deadline=$((SECONDS + READY_TIMEOUT))
  until curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$port/health"; do
    kill -0 "${pids[i]}" 2>/dev/null || { tail -n 20 "$RUN_DIR/instance-$i.log" >&2; die "instance $i exited while loading"; }
    [ $SECONDS -lt $deadline ] || die "instance $i not ready after ${READY_TIMEOUT}s"
    sleep 0.5
  done
done

# One nginx in front. Streaming-safe: no response buffering (SSE tokens pass as they come),
# HTTP/1.1 keep-alive to the instances, read timeouts as long as a long generation.
mkdir -p "$RUN_DIR/nginx-temp"
cat >"$RUN_DIR/nginx.conf" <<EOF
daemon off;
worker_processes ${#plan[@]};
pid $RUN_DIR/nginx.pid;
error_log $RUN_DIR/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log $RUN_DIR/nginx-access.log;
  client_body_temp_path $RUN_DIR/nginx-temp/body;
  proxy_temp_path $RUN_DIR/nginx-temp/proxy;
  fastcgi_temp_path $RUN_DIR/nginx-temp/fastcgi;
  uwsgi_temp_path $RUN_DIR/nginx-temp/uwsgi;
  scgi_temp_path $RUN_DIR/nginx-temp/scgi;
  upstream slabserve {
    least_conn;
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
      proxy_request_buffering off;
      proxy_cache off;
      proxy_connect_timeout 5s;
      proxy_send_timeout 3600s;
      proxy_read_timeout 3600s;
    }
  }
}
EOF
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
log "ready: ${#pids[@]} instances behind http://$HOST:$PORT (Ctrl-C stops them)"

# Runs until a signal, or until nginx or an instance dies, which takes the rest down too.
set +e
wait -n "${pids[@]}" "$nginx_pid"
rc=$?
log "a child exited (status $rc); stopping the rest"
exit 1
