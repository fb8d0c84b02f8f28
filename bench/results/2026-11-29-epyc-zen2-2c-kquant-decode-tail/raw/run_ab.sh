#!/bin/sh
# base = commit 5d9b6a8 built here (/tmp/*_cur), new = the change (/tmp/*_new); alternating rounds
cd /tmp/res/raw
for i in 1 2 3; do
  for b in cur new; do
    n=$([ $b = cur ] && echo base || echo new)
    for t in 1 2; do
      /tmp/bm_$b -m /work/models/tl-Q4_K_M.gguf --prompt-len 16 --decode-tokens 64 --reps 1 --threads $t > model-decode-${t}t-$n-$i.txt 2>&1
    done
    /tmp/blq_$b --quick --threads 1 --m 1,16,128 --kinds q4k,q6k --ops up,down > linear-1t-$n-$i.txt 2>&1
    /tmp/blq_$b --quick --threads 1 --m 1 --kinds q4k,q6k --ops up,down --cycle-x 1 > linear-1t-l3-$n-$i.txt 2>&1
  done
done
for i in 1 2; do
  for b in cur new; do
    n=$([ $b = cur ] && echo base || echo new)
    /tmp/bm_$b -m /work/models/tl-Q4_K_M.gguf --prompt-len 512 --decode-tokens 4 --reps 2 > model-prefill-2t-$n-$i.txt 2>&1
  done
done
echo done
