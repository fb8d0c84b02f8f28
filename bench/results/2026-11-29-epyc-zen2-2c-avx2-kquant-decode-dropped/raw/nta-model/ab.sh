#!/bin/bash
# alternating EXP_HINT=1 (T1) vs 2 (NTA) whole-model Q4_K_M decode
cd /work/main/build-bench
for round in 1 2 3; do for h in 1 2; do for t in 1 2; do
  c=$([ $t = 1 ] && echo 0 || echo 0,1)
  EXP_HINT=$h taskset -c $c ./bench/bench_model --model /work/models/tl-Q4_K_M.gguf --prompt-len 16 --decode-tokens 64 --reps 1 --threads $t > /work/runs/nta/model-h$h-t$t-r$round.log 2>&1
  echo "r$round hint=$h t=$t: $(grep -E '^decode: ' /work/runs/nta/model-h$h-t$t-r$round.log | sed 's/(median.*//') $(grep -E '^decode at' /work/runs/nta/model-h$h-t$t-r$round.log | sed 's/(median over.*//')"
done; done; done
