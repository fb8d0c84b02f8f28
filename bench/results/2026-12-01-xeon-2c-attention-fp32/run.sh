#!/bin/sh
# Attention on FP32 products (AttentionArgs::fp32_products) against the vdpbf16ps block, on this
# machine's AVX-512 path: one block in L1 (bench_attention_block), decode and prefill attention
# from DRAM (bench_attention --quick, alternating, two rounds), and a Qwen2.5-0.5B-shaped model
# (7 query heads a KV head: decode attention on AVX-512 even with AMX) at batch 64, where
# --blocking products=dot puts attention back on vdpbf16ps (its linears run on AMX either way).
#   QWEN=DIR sh bench/results/2026-12-01-xeon-2c-attention-fp32/run.sh   (from the repository root)
set -eu
here=$(dirname "$0")
bin=./build-bench/bench
qwen=${QWEN:?QWEN=folder made by bench/make_random_checkpoint.py --shape qwen2.5-0.5b}
# This CPU's entry (model/linear_tuning.cpp, intel), products aside: --blocking starts from the defaults.
entry=k=512,tile=6x64,prefetch=on,amx=0,amxprefill=128,amxpf=16384,split=dynamic,dpf=8192
"$bin/bench_attention_block" > "$here/block.log" 2>&1
: > "$here/decode.log"
for round in 1 2; do
  for variant in dot fp32; do
    flag=; [ "$variant" = fp32 ] && flag=--fp32-products
    echo "== round $round $variant" >> "$here/decode.log"
    "$bin/bench_attention" --quick $flag >> "$here/decode.log" 2>&1
  done
done
: > "$here/model.log"
for round in 1 2; do
  for variant in dot fma; do
    echo "== round $round products=$variant" >> "$here/model.log"
    "$bin/bench_model" -m "$qwen" --batch 64 --prompt-len 256 --decode-tokens 16 --reps 1 \
      --blocking "$entry,products=$variant" >> "$here/model.log" 2>&1
  done
done
grep -E "^== |decode: batch|decode phases" "$here/model.log"
