# Sourced by this folder's scripts: where the programs are, the threads, the rounds, the Intel
# entry's blocking, and `alternate`, which runs each variant in turn, ROUNDS times over.
# BIN: the bench folder (default build-bench/bench); THREADS (default 2); ROUNDS (default 2).
BIN=${BIN:-build-bench/bench}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-2}
INTEL="k=512,tile=6x64,prefetch=on,amx=0,split=dynamic,dpf=8192,products=fma"
alternate() {  # PREFIX FN VARIANT...: "== PREFIXround R VARIANT", then FN VARIANT
  prefix=$1
  fn=$2
  shift 2
  r=1
  while [ "$r" -le "$ROUNDS" ]; do
    for v in "$@"; do
      echo "== ${prefix}round $r $v"
      "$fn" "$v"
    done
    r=$((r + 1))
  done
}
