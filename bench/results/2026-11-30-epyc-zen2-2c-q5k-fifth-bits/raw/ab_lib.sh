# Shared by this folder's A/B scripts: the base build (BASE, default /tmp/base/build, the commit
# before the change) against this checkout's build-bench (NEW), each run labelled.
BASE=${BASE:-/tmp/base/build/bench}
NEW=${NEW:-/work/main/build-bench/bench}
MODELS=${MODELS:-/work/models}

bench_dir() { if [ "$1" = base ]; then echo "$BASE"; else echo "$NEW"; fi; }

# linears BUILD LABEL ARGS...: bench_linear_quant --quick --threads 1 ARGS, the table rows only.
linears() {
  b=$(bench_dir "$1"); label=$2; shift 2
  echo "== $label"
  "$b"/bench_linear_quant --quick --threads 1 "$@" 2>&1 | grep -E "^(o|up|down) "
}

# model BUILD LABEL FILE THREADS PROMPT DECODE PATTERN [ARGS...]: bench_model on tl-FILE.gguf.
model() {
  b=$(bench_dir "$1"); label=$2; file=$3; th=$4; prompt=$5; decode=$6; pattern=$7; shift 7
  echo "== $label"
  "$b"/bench_model -m "$MODELS/tl-$file.gguf" --prompt-len "$prompt" --decode-tokens "$decode" --threads "$th" "$@" \
    2>&1 | grep -E "$pattern"
}
