# load ROUND ARGS...: starts `$SLABSERVE serve ARGS` (default ./build-bench/slabserve) on port
# 8123, waits for /health, prints its "loaded in X s" and stops it. Sourced by this folder's
# run.sh and by ../2026-11-30-xeon-2c-parallel-repack's scripts.
load() {
  r=$1; shift
  "${SLABSERVE:-./build-bench/slabserve}" serve --port 8123 "$@" > /tmp/parallel-pack-serve.log 2>&1 &
  pid=$!
  until curl -sf localhost:8123/health > /dev/null; do
    kill -0 "$pid" 2> /dev/null || { echo "round $r $*: serve exited: $(tail -1 /tmp/parallel-pack-serve.log)"; return 1; }
    sleep 0.1
  done
  echo "round $r $*: $(grep -o 'loaded in [0-9.]* s' /tmp/parallel-pack-serve.log)"
  kill "$pid"; wait "$pid"
}
