#!/bin/sh
# Alternating base (ce6505e) / new (64-byte aligned block buffer): batch-1 prefill-512 and the
# linears at M = 128, 512 on 1 and 2 threads.
R=/work/runs/align2
for round in 1 2; do
  for v in base new; do
    B=/work/$v/build-bench/bench; [ $v = new ] && B=/work/main/build-bench/bench
    for t in 1 2; do
      taskset -c 0-$((t-1)) $B/bench_model --model /work/models/tl-bf16.gguf --threads $t --prompt-len 512 --decode-tokens 4 --reps 1 > $R/prefill-${t}t-$v-$round.log 2>&1
      taskset -c 0-$((t-1)) $B/bench_linear_bf16 --quick --model tinyllama --m 128,512 --threads $t > $R/linear-${t}t-$v-$round.log 2>&1
    done
  done
done
echo done > $R/DONE
