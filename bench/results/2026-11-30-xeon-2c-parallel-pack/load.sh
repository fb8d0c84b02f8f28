# load ROUND ARGS...: starts `slabserve serve ARGS` from ./build-bench on port 8123, waits for
# /health, prints its "loaded in X s" and stops it. Sourced by this folder's run.sh and by
# ../2026-11-30-xeon-2c-parallel-repack/run.sh.
load() {
  r=$1; shift
  ./build-bench/slabserve serve --port 8123 "$@" > /tmp/parallel-pack-serve.log 2>&1 &
  pid=$!
  until curl -sf localhost:8123/health > /dev/null; do sleep 0.1; done
  echo "round $r $*: $(grep -o 'loaded in [0-9.]* s' /tmp/parallel-pack-serve.log)"
  kill "$pid"; wait "$pid"
}
