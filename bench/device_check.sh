#!/bin/sh
# The checks a session lent the 16-core device machine runs first, in one call: the kernel tests
# on its ISA (AMX-BF16 and AMX-INT8 tiles on the hardware, where this machine only emulates them),
# the quantized linears with their +amx rows against the tdpbsud peak, and the whole model's
# prefill with W8 and W4 weights, AMX on and off, on all cores.
#
# Here (the device has no package registry: build, then pack the programs and their libraries;
# compressed, as the tree and the carried paths travel within 64 MiB and ICU's data alone is 31 MB):
#   cmake -S . -B build-bench -DSLAB_BUILD_BENCH=ON -DCMAKE_BUILD_TYPE=Release
#   cmake --build build-bench -j2 --target slab_unit_tests bench_linear_quant bench_model
#   ../shared/tools/device-pack.sh build-bench/tests/slab_unit_tests \
#       build-bench/bench/bench_linear_quant build-bench/bench/bench_model
#   tar cJf .device-pack.tar.xz .device-pack && echo /.device-pack.tar.xz >> .git/info/exclude
# There (the device tool's run: carry [".device-pack.tar.xz"], timeout_s 420; about 3 minutes):
#   sh bench/device_check.sh
# Logs go to $OUT (the tool brings them back), else /tmp/device-check.
set -u
pack=${PACK:-$PWD/.device-pack}
out=${OUT:-/tmp/device-check}
model=${MODEL:-/tmp/tinyllama-random}
[ -d "$pack" ] || tar xJf "$pack.tar.xz" || exit 1
export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$out"
step() { echo "== $*" >&2; }

step machine
{
  lscpu | grep -E "Model name|^CPU\(s\)|Thread|NUMA node\(s\)|L2|L3"
  grep -m1 -o -E "amx[a-z0-9_]*( amx[a-z0-9_]*)*" /proc/cpuinfo || echo "no amx flags"
  grep -m2 -E "^(cpu family|model)\s" /proc/cpuinfo
} > "$out/machine.txt" 2>&1

step unit tests: kernels and quantized linears on this ISA
"$pack/bin/slab_unit_tests" "[kernels],[quant]" > "$out/unit-tests.log" 2>&1
echo "rc=$?" >> "$out/unit-tests.log"
tail -3 "$out/unit-tests.log" >&2

step quantized linears, 16 threads and 1
# --cycle-x 1: the batched rows read their weights from cache anyway (no 16x-L3 copies to make).
"$pack/bin/bench_linear_quant" --quick --cycle-x 1 --m 64,256 --ops up,down \
  --kinds bf16,w8,w8g32,w4g32,q4k,q6k > "$out/linear-quant.log" 2>&1
"$pack/bin/bench_linear_quant" --quick --cycle-x 1 --threads 1 --m 64 --ops down --kinds w8,w4g32,q4k \
  >> "$out/linear-quant.log" 2>&1

step random TinyLlama checkpoint
[ -f "$model/config.json" ] || python3 bench/make_random_checkpoint.py --shape tinyllama "$model" > /dev/null

step model prefill: W8 and W4, AMX on and off
for q in w8 w4 none; do
  for amx in "" --no-amx; do
    echo "\$ bench_model --quantization $q $amx" >> "$out/model.log"
    "$pack/bin/bench_model" --model "$model" --quantization "$q" $amx --prompt-len 512 --decode-tokens 8 --reps 3 \
      2>&1 | grep -E "kernels|prefill|decode:|roofline:" >> "$out/model.log"
  done
done
echo "done: $out" >&2
