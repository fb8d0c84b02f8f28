#!/bin/bash
# K-quant measurements, one run, sequential on the 2 cores.
set -u
OUT=/tmp/kqrun/out; mkdir -p $OUT
LLB=/tmp/slab-quant/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin
BM=/work/main/build-dev/bench/bench_model
QK=/work/main/build-dev/bench/quant_kl
D=/tmp/slab-quant
export LD_LIBRARY_PATH=$LLB
{
echo "## machine"; lscpu | grep -E "Model name|^CPU\(s\)"; grep -m2 -E "cpu family|^model\s" /proc/cpuinfo; uptime
echo "## decode: llama-bench -t 2 -p 0 -n 64 -r 2 vs bench_model --prompt-len 16 --decode-tokens 64 --batch 1 --reps 1, alternating"
for round in 1 2 3; do
  for f in Q4_K_M Q5_K_M Q4_0; do
    g=$D/tinyllama-random-$f.gguf
    l=$(taskset -c 0-1 $LLB/llama-bench -m $g -t 2 -p 0 -n 64 -r 2 2>&1 | grep tg64 | awk -F'|' '{print $(NF-1)}')
    s=$($BM -m $g --prompt-len 16 --decode-tokens 64 --batch 1 --reps 1 2>&1 | grep -E "^decode:|^roofline" | tr '\n' ' ')
    echo "round $round $f | llama tg64 $l | slab $s | load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
echo "## prefill 512: llama-bench -t 2 -p 512 -n 0 -r 2 vs bench_model --prompt-len 512 --decode-tokens 1 --reps 2"
for f in Q4_K_M Q5_K_M; do
  g=$D/tinyllama-random-$f.gguf
  l=$(taskset -c 0-1 $LLB/llama-bench -m $g -t 2 -p 512 -n 0 -r 2 2>&1 | grep pp512 | awk -F'|' '{print $(NF-1)}')
  s=$($BM -m $g --prompt-len 512 --decode-tokens 1 --reps 2 2>&1 | grep -E "^prefill:")
  echo "$f | llama pp512 $l | slab $s | load $(cut -d' ' -f1 /proc/loadavg)"
done
echo "## weights lines"
for f in Q4_K_M Q5_K_M; do $BM -m $D/tinyllama-random-$f.gguf --prompt-len 8 --decode-tokens 2 --reps 1 2>&1 | grep -E "^weights"; done
echo "## KL: llama-perplexity (ctx 512, 3 chunks) and quant_kl on bench/data/quant_kl_story.txt"
taskset -c 0-1 $LLB/llama-perplexity -m $D/tinyllama-random-bf16.gguf -f /work/main/bench/data/quant_kl_story.txt -c 512 -b 512 --chunks 3 -t 2 -ngl 0 --kl-divergence-base $OUT/base.kld > $OUT/ppl-base.log 2>&1
for f in Q4_K_M Q5_K_M; do
  taskset -c 0-1 $LLB/llama-perplexity -m $D/tinyllama-random-$f.gguf -f /work/main/bench/data/quant_kl_story.txt -c 512 -b 512 --chunks 3 -t 2 -ngl 0 --kl-divergence-base $OUT/base.kld --kl-divergence > $OUT/ppl-$f.log 2>&1
  echo "llama.cpp $f: $(grep -E "^Mean    KLD|Mean KLD" $OUT/ppl-$f.log | head -1)"
done
$QK -m $D/tinyllama-random --text /work/main/bench/data/quant_kl_story.txt --ctx 512 --chunks 3 --threads 2 --test $D/tinyllama-random-Q4_K_M.gguf --test $D/tinyllama-random-Q5_K_M.gguf 2>&1 | grep -E "RESULT|vs none"
uptime
} 2>&1 | tee $OUT/measure.log
