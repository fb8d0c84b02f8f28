#!/bin/sh
# Model-level A/B of the AVX-512 decode prefetch (dpf) in one build: batch 5 and 8 decode of BF16
# TinyLlama on two threads, dpf=0 against dpf=8192, two alternating rounds. MODEL: a BF16 GGUF.
B="k=512,tile=6x64,prefetch=on,amx=0,split=dynamic,products=fma"
for round in 1 2; do
  for d in 0 8192; do
    for b in 5 8; do
      echo "### round $round dpf=$d batch=$b"
      ./build-bench/bench/bench_model --model "$MODEL" --prompt-len 16 --decode-tokens 32 --batch $b --reps 1 \
        --threads 2 --blocking "$B,dpf=$d"
    done
  done
done
