#!/bin/sh
# Load time of `slabserve serve` ("loaded in X s" on its log) for GGUF files whose blocks are
# repacked (Q4_K_M: K-quant 4- and 6-bit; Q8_0: W8 g32; Q4_0: W4 g32), packed on one thread
# (--threads 1) and on two (--threads 2), alternating, in one build. MODELS: a folder with
# tl-Q4_K_M.gguf, tl-Q8_0.gguf and tl-Q4_0.gguf (random TinyLlama-shaped GGUFs).
set -u
. "$(dirname "$0")/../2026-11-30-xeon-2c-parallel-pack/load.sh"
for q in Q4_K_M Q8_0 Q4_0; do
  for r in 1 2 3; do
    for t in 1 2; do load $r --model "$MODELS/tl-$q.gguf" --threads $t; done
  done
done
