#!/bin/sh
# Alternating base (55f1c75) / new (W8 g32 decode of one and two rows on AVX2: four panels a
# tile, four streams): the W8 g32 linears at M = 1, 2 and Q8_0 decode at batch 1 and 2.
R=/work/runs/w8s2
for round in 1 2 3; do
  for v in base new; do
    B=/work/$v/build-bench/bench; [ $v = new ] && B=/work/main/build-bench/bench
    for t in 1 2; do
      taskset -c 0-$((t-1)) $B/bench_linear_quant --quick --kinds w8g32 --m 1,2 --threads $t > $R/linear-${t}t-$v-$round.log 2>&1
      for b in 1 2; do
        taskset -c 0-$((t-1)) $B/bench_model --model /work/models/tl-Q8_0.gguf --threads $t --batch $b --prompt-len 64 --decode-tokens 32 --reps 1 > $R/model-${t}t-b$b-$v-$round.log 2>&1
      done
    done
  done
done
echo done > $R/DONE
