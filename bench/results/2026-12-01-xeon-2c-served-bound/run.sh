#!/bin/sh
# bench_engine's served figure beside its bound: TinyLlama BF16 (GGUF), c = 64, 128 in / 128 out,
# two rounds on two threads; then the same run's work at the 16-core Xeon's measured peaks
# (bound_at_peaks.py over ../2026-11-30-xeon-emr-16c-fp32-products/ratio.log, and with DRAM's
# bandwidth from scaling.log).
#   MODEL=FILE sh bench/results/2026-12-01-xeon-2c-served-bound/run.sh   (from the repository root)
set -eu
here=$(dirname "$0")
model=${MODEL:?MODEL=path to a TinyLlama-shaped BF16 GGUF or folder}
for round in 1 2; do
  echo "== round $round"
  ./build-bench/bench/bench_engine --model "$model" --threads 2 --concurrency 64 --prompt-len 128 --output-len 128 \
    --prefix-len 0
done > "$here/engine.log" 2>&1
python3 "$here/bound_at_peaks.py" "$here/engine.log" "$here/../2026-11-30-xeon-emr-16c-fp32-products/ratio.log" \
  > "$here/bound-at-16c-peaks.log"
cat "$here/bound-at-16c-peaks.log"
# The same with the read term from DRAM-sized sweeps (bench_model's 1 GiB samples in scaling.log):
# ratio.log's 300 MB sweep is the device's L3 size (README, "Correction").
python3 "$here/bound_at_peaks.py" "$here/engine.log" "$here/../2026-11-30-xeon-emr-16c-fp32-products/ratio.log" \
  --bandwidth-log "$here/../2026-11-30-xeon-emr-16c-fp32-products/scaling.log" > "$here/bound-at-16c-dram.log"
cat "$here/bound-at-16c-dram.log"
