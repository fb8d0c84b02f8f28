#!/bin/sh
# What a session lent the 16-core device machine runs there, in one call. Parts, each on unless
# its variable is 0 (SCALING is off unless 1):
#   TESTS    the kernel, attention and model tests on its ISA (AMX-BF16 and AMX-INT8 tiles on the
#            hardware, where the build machine only emulates them)
#   MODEL    slabserve against llama.cpp on the same GGUF files (BF16, Q8_0, Q4_K_M, made there)
#            on all cores, AMX off and on; each bench_model run prints its per-phase prefill
#            and decode times and the dot-product peaks measured on its own threads; then
#            batch-64 decode steps at all threads and 2
#   AB       rounds of llama.cpp, then slabserve without AMX on FP32 products (the Intel tuning
#            entry, --blocking products=fma) and on vdpbf16ps (products=dot), then with AMX,
#            alternating, on BF16: this host's vector throughput moves by 2x within minutes, so
#            only adjacent runs compare (the static/dynamic split A/B of 2026-11-27 is settled)
#   ATTN     prefill attention alone (bench_attention, one layer, 512 and 2048 tokens) on the
#            AVX-512 block (dot products and FP32 products) and on the AMX tiles, alternating, two
#            rounds; then decode attention (22 layers, batch 1 and 16, contexts 128 to 4096) at all
#            threads, both products; then one block at a time on cpu 0 (bench_attention_block):
#            the AVX-512 block both ways, the AMX block whole and its AVX-512 work alone
#   LINEARS  the linears alone (BF16 with --sweep on gate_up, which includes the split flip;
#            the quantized ones; the decode prefetch of 5..8 rows off and on, dpf=0/8192, each
#            read against its run's M = 4 row; batched decode rows, 9-64, on the AMX tiles and
#            9-15 on AVX-512, and the quantized AMX-BF16 starts at 20-64 rows)
#   SERVED   slabserve serve at c = 64 (128 in / 64 out), all threads, 8, 4 and 2 (SERVED_THREADS
#            overrides the list); then the same
#            load on the engine alone (bench_engine, no HTTP) at all threads and 2: what of the
#            served ratio the engine keeps, its serial share per step, its phases
#   SCALING  the 1/2/4/8/16-thread table (bench/scaling.py)
#   RATIO    (off unless 1) what bounds the served all/2-thread ratio: DRAM read bandwidth and
#            the vdpbf16ps, tdpbf16ps and FMA peaks at all threads and at 2, alternating, three rounds; then the c = 64
#            load on the engine alone with AMX and without, at all threads and 2
#   AMXSPLIT (off unless 1) the AMX work split of batched decode steps, alternating, two rounds:
#            the 64-row step (bench_model --batch 64) at all threads with the Intel entry's
#            blocking under the old split (amxprefill=64: two-panel column groups, a group's rows
#            cut over threads from 64 rows, as TinyLlama's QKV, O and down were at 16 threads),
#            the new (amxprefill=128: one-panel groups, rows cut from 128) with the AMX panel
#            prefetch off, 4 KB and 16 KB ahead (amxpf; 16 KB the default since 2026-12-01); the
#            c = 64 engine under the old (no prefetch) and the new; then the new at 2 threads
#   POOL     an empty parallel region at 1/2/4/8/16 threads, the workers' completion as
#            per-worker slots against the shared counter (bench_thread_pool, into setup.log), ~20 s
#   PAIRS    the vdpbf16ps and tdpbf16ps peaks on cpu 0 alone, on cpus 0,1 and on cpus 0,8: the
#            guest reports one thread per core, but if 0,1 gives about cpu 0's rate and 0,8
#            twice it, vCPUs 0 and 1 share a physical core (the 2-thread baselines then run on
#            one core)
#
# Here: `LLAMA_CPP=DIR sh bench/device_pack.sh` builds the programs and packs them with their
# libraries, llama.cpp's llama-bench (a build with AMX and one without) and llama-quantize,
# gguf-py and the llama2 tokenizer into .device-pack.tar.xz (its header says how to build DIR).
# There (the device tool's run: carry [".device-pack.tar.xz"]; ~8 minutes; the machine stays
# warm for 30 s after a call, and the GGUF files with it). On 2026-11-30: setup, TESTS, one AB
# round, MODEL and SERVED at 16 and 2 threads took 204 s; LINEARS and SCALING 252 s; RATIO 153 s:
#   sh bench/device_check.sh
#   TESTS=0 AB=0 MODEL=0 SERVED=0 PAIRS=0 POOL=0 LINEARS=0 ATTN=0 SCALING=1 sh bench/device_check.sh  # ~3.5 min
# (the tool brings back 8 files at most: the scaling table's four go in a call of their own).
# Logs go to $OUT (the tool brings back 8 files at most), else /tmp/device-check.
set -u
pack=${PACK:-$PWD/.device-pack}
out=${OUT:-/tmp/device-check}
work=${WORK:-/tmp/device-models}
[ -d "$pack" ] || tar xJf "$pack.tar.xz" || exit 1
export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$out" "$work"
bin=$pack/bin
step() { echo "== $* ($(date +%T))" >&2; }
on() { [ "$(eval echo "\${$1:-1}")" = 1 ]; }
all=$(nproc)
bf16=$work/tl-bf16.gguf

step machine and GGUF files
{
  lscpu
  grep -m1 -o -E "amx[a-z0-9_]*( amx[a-z0-9_]*)*" /proc/cpuinfo || echo "no amx flags"
  uname -a; free -g | head -2
  # BF16 random TinyLlama, then Q8_0 and Q4_K_M from it.
  [ -f "$bf16" ] || PYTHONPATH=$pack/gguf-py python3 bench/make_random_checkpoint.py --shape tinyllama \
    --tokenizer-from "$pack/tokenizer" --gguf "$bf16"
  for q in Q8_0 Q4_K_M; do
    [ -f "$work/tl-$q.gguf" ] || "$bin/llama-quantize" "$bf16" "$work/tl-$q.gguf" "$q" "$all" | tail -2
  done
  ls -la "$work"
} > "$out/setup.log" 2>&1

if on TESTS; then
  step unit tests: kernels, quantized linears, attention, the model against transformers on this ISA
  # The emulated AMX cases (slow, and the same on every AVX-512 CPU) stay on the build machine;
  # [model] runs the whole forward with the AMX linears and attention against the fixtures.
  # SLAB_TESTDATA: the pack's copy of stories260K, since ../shared does not travel.
  SLAB_TESTDATA=$pack/testdata "$bin/slab_unit_tests" "[kernels]~*emulated*,[quant]~*emulated*,[attention],[model]" \
    > "$out/unit-tests.log" 2>&1
  echo "rc=$?" >> "$out/unit-tests.log"
  tail -3 "$out/unit-tests.log" >&2
fi

# llama.cpp's pp512 (and tg16 unless a third argument says 0) on FILE with T threads: the AMX
# build, else the one without AMX.
peer() {  # FILE T [N]
  for b in llama-bench llama-bench-noamx; do
    r=$(taskset -c "0-$(($2 - 1))" "$bin/$b" -m "$1" -t "$2" -p 512 -n "${3:-16}" -r 3 -o md 2>&1 | grep -E "^\| llama")
    [ -n "$r" ] && { echo "$r" | sed "s/^/$b /"; return; }
  done
  echo "llama-bench failed on $1"
}
ours() {  # FILE T ARGS (bench_model's, --prompt-len among them)
  f=$1; t=$2; shift 2
  echo "\$ bench_model $(basename "$f") --threads $t $*"
  taskset -c "0-$((t - 1))" "$bin/bench_model" --model "$f" --threads "$t" "$@" 2>&1 |
    grep -E "kernels|^prefill|peaks|^decode"
}

if on AB; then
  step "A/B: FP32 products against vdpbf16ps, then AMX, beside llama.cpp, ${ROUNDS:-3} rounds"
  for round in $(seq "${ROUNDS:-3}"); do
    echo "### round $round"
    peer "$bf16" "$all" 0
    for products in fma dot; do
      ours "$bf16" "$all" --prompt-len 512 --decode-tokens 4 --reps 2 --blocking "products=$products" --no-amx
    done
    ours "$bf16" "$all" --prompt-len 512 --decode-tokens 4 --reps 2
  done > "$out/ab.log" 2>&1
fi

if on MODEL; then
  step model: slabserve and llama.cpp on the same files, all $all threads
  for f in "$bf16" "$work/tl-Q8_0.gguf" "$work/tl-Q4_K_M.gguf"; do
    echo "### $(basename "$f"), $all threads"
    peer "$f" "$all"
    ours "$f" "$all" --prompt-len 512 --decode-tokens 16 --reps 3 --no-amx
    ours "$f" "$all" --prompt-len 512 --decode-tokens 16 --reps 3
  done > "$out/model.log" 2>&1
  # Batch-64 decode steps, the served c = 64 runs' bulk: their phases at all threads and 2.
  for t in "$all" 2; do
    ours "$bf16" "$t" --prompt-len 128 --batch 64 --decode-tokens 8 --reps 1
  done >> "$out/model.log" 2>&1
fi

if on SERVED; then
  step served c = 64 at $all, 8, 4 and 2 threads
  for t in ${SERVED_THREADS:-$all 8 4 2}; do
    "$bin/slabserve" serve --model "$bf16" --threads "$t" --port 8011 > "$work/serve-$t.log" 2>&1 &
    pid=$!
    python3 -c "import time, urllib.request as u
for _ in range(120):
    try: u.urlopen('http://127.0.0.1:8011/health', timeout=2); break
    except Exception: time.sleep(1)"
    echo "### slabserve serve --threads $t"
    python3 bench/bench_serve.py --base-url http://127.0.0.1:8011 --random-input-len 128 --random-output-len 64 \
      --num-prompts 64 --max-concurrency 64 --label "c64-${t}t"
    kill "$pid"; wait "$pid"
  done > "$out/served.log" 2>&1
  for t in "$all" 2; do
    echo "### bench_engine --threads $t"
    taskset -c "0-$((t - 1))" "$bin/bench_engine" --model "$bf16" --threads "$t" --concurrency 64 --prompt-len 128 \
      --output-len 64 --prefix-len 0
  done >> "$out/served.log" 2>&1
fi

if on POOL; then
  step "empty parallel regions, slots against the counter"
  # Into setup.log beside lscpu: the tool brings back 8 files at most.
  "$bin/bench_thread_pool" --rounds 5 >> "$out/setup.log" 2>&1
fi

if on PAIRS; then
  step "peaks on cpu 0, cpus 0,1 and cpus 0,8"
  for cpus in 0 0,1 0,$((all / 2)); do
    echo "### taskset -c $cpus"
    n=$(echo "$cpus" | tr ',' '\n' | wc -l)
    taskset -c "$cpus" "$bin/bench_linear_bf16" --quick --threads "$n" --op o --m 16 --cycle-x 1 2>&1 | grep -E "peak \("
  done > "$out/pairs.log" 2>&1
fi

if on ATTN; then
  step "prefill attention: AVX-512 block (dot products, FP32 products) against the AMX tiles, 2 rounds"
  for round in 1 2; do
    for variant in "" --fp32-products --amx; do
      echo "### round $round: bench_attention --only prefill $variant"
      "$bin/bench_attention" --only prefill --reps 5 --cycle-x 1 $variant 2>&1 | grep -E "peak|threads:|^ +[0-9]+ +[0-9]+ "
    done
  done > "$out/attention.log" 2>&1
  step "decode attention, all threads: dot products, FP32 products"
  # KV read as one 8 KB run per (block, layer, head) since 5b336da: the share of the bandwidth
  # it reaches on 16 cores (on 2 Zen 5 threads: 62-65 %; on 2 Xeon cores 23-36 % on the dot
  # products, 30-45 % on FP32 products, 2026-12-01-xeon-2c-attention-fp32).
  for variant in "" --fp32-products; do
    echo "### bench_attention --quick --only decode $variant"
    "$bin/bench_attention" --quick --only decode $variant
  done >> "$out/attention.log" 2>&1
  step "attention blocks on cpu 0: AVX-512, the AMX block's AVX-512 work, the AMX block"
  for round in 1 2; do
    taskset -c 0 "$bin/bench_attention_block"
  done >> "$out/attention.log" 2>&1
fi

if on LINEARS; then
  step linears alone, all threads
  {
    "$bin/bench_linear_bf16" --quick --model tinyllama --op gate_up --m 512 --cycle-x 1 --sweep
    "$bin/bench_linear_bf16" --quick --model tinyllama --op down --m 512 --cycle-x 1 --sweep --isa amx
    "$bin/bench_linear_quant" --quick --cycle-x 1 --m 512 --ops up,down --kinds w8,q4k
    for dpf in 0 8192 0 8192; do
      "$bin/bench_linear_bf16" --quick --model tinyllama --op gate_up --m 4,5,8 --blocking "dpf=$dpf"
    done
    # Batched decode rows on the tiles, weights from memory: the BF16 tiles' 9-row start and the
    # share of the bandwidth 16-64 rows reach (on two Xeon threads 45-78 %; a core's tile loads
    # streamed ~10 GB/s there against ~15 for AVX-512 loads), then the quantized AMX-BF16 starts.
    "$bin/bench_linear_bf16" --quick --model tinyllama --op gate_up --m 9,12,15,16,32,64 --cycle-x 1 --isa amx
    # The same rows with the weights cycled over 16x the L3, as in a model step (2 GB): on
    # 2026-11-30 --cycle-x 1 read 82 GB/s at M = 64 where the model's 64-row steps read 55.
    "$bin/bench_linear_bf16" --quick --model tinyllama --op gate_up --m 16,32,64 --cycle-x 16 --isa amx
    "$bin/bench_linear_bf16" --quick --model tinyllama --op gate_up --m 9,12,15 --cycle-x 1
    "$bin/bench_linear_quant" --quick --cycle-x 1 --m 20,32,40,64 --ops up --kinds w8g32,w4g32,q4k
  } > "$out/linear.log" 2>&1
fi

if [ "${RATIO:-0}" = 1 ]; then
  step "peaks at $all threads and 2, then the engine at c = 64 with AMX and without"
  for round in 1 2 3; do
    for t in "$all" 2; do
      echo "### round $round, $t threads"
      # --limits-only sweeps 4x the L3 (dram_probe_bytes): before, --cycle-x 1 swept the L3's size.
      taskset -c "0-$((t - 1))" "$bin/bench_linear_bf16" --quick --threads "$t" --limits-only 2>&1 | grep -E "peak \(|bandwidth"
    done
  done > "$out/ratio.log" 2>&1
  for amx in "" "--no-amx 1"; do
    for t in "$all" 2; do
      echo "### bench_engine --threads $t $amx"
      taskset -c "0-$((t - 1))" "$bin/bench_engine" --model "$bf16" --threads "$t" --concurrency 64 --prompt-len 128 \
        --output-len 64 --prefix-len 0 $amx
    done
  done >> "$out/ratio.log" 2>&1
fi

if [ "${AMXSPLIT:-0}" = 1 ]; then
  step "AMX column groups and row splits: 64-row steps and c = 64, old split against new"
  intel="k=512,tile=6x64,prefetch=on,amx=0,split=dynamic,dpf=8192,products=fma"
  old="$intel,amxprefill=64,amxpf=0"
  new="$intel,amxprefill=128,amxpf=16384"
  for round in 1 2; do
    echo "### round $round"
    for b in "$old" "$intel,amxprefill=128,amxpf=0" "$intel,amxprefill=128,amxpf=4096" "$new"; do
      ours "$bf16" "$all" --prompt-len 128 --batch 64 --decode-tokens 8 --reps 1 --blocking "$b"
    done
    for b in "$old" "$new"; do
      taskset -c "0-$((all - 1))" "$bin/bench_engine" --model "$bf16" --threads "$all" --concurrency 64 \
        --prompt-len 128 --output-len 64 --prefix-len 0 --blocking "$b" | grep -E "^blocking|^64 "
    done
  done > "$out/groups.log" 2>&1
  taskset -c 0-1 "$bin/bench_engine" --model "$bf16" --threads 2 --concurrency 64 --prompt-len 128 --output-len 64 \
    --prefix-len 0 --blocking "$new" | grep -E "^blocking|^64 " >> "$out/groups.log" 2>&1
fi

if [ "${SCALING:-0}" = 1 ]; then
  step scaling 1-16 threads
  mkdir -p "$out/scaling"
  python3 bench/scaling.py --model "$bf16" --threads 1,2,4,8,16 --decode 32 --bench-model "$bin/bench_model" \
    --llama-bench "$bin/llama-bench" --out "$out/scaling" > /dev/null 2>&1
fi
step "done: $out"
