#!/bin/sh
# prev = commit dba17c4 (Q6_K only) built here (/tmp/*_prev), final = every one-row K-quant tile (/tmp/*_final)
cd /tmp/res/raw2
for i in 1 2 3; do
  for b in prev final; do
    for t in 1 2; do
      /tmp/bm_$b -m /work/models/tl-Q4_K_M.gguf --prompt-len 16 --decode-tokens 64 --reps 1 --threads $t > model-decode-${t}t-$b-$i.txt 2>&1
    done
    /tmp/blq_$b --quick --threads 1 --m 1 --kinds q4k,q6k --ops o,up,down > linear-1t-$b-$i.txt 2>&1
  done
done
echo done
