#!/bin/sh
# Load time of an F16 GGUF (`slabserve serve`'s "loaded in X s"): the build before 80fd3cc, which
# widened each F16 tensor to FP32 on the loading thread before the team packed it (OLD), against
# the build after it, where each packing thread widens its own rows (NEW), at 2 threads, and the
# new build at 1 thread; alternating. MODELS: a folder with tl-f16.gguf (llama-quantize ... F16).
set -u
. "$(dirname "$0")/../2026-11-30-xeon-2c-parallel-pack/load.sh"
for round in 1 2 3; do
  SLABSERVE=$OLD load "$round old" --model "$MODELS/tl-f16.gguf" --threads 2
  SLABSERVE=$NEW load "$round new" --model "$MODELS/tl-f16.gguf" --threads 2
  SLABSERVE=$NEW load "$round new" --model "$MODELS/tl-f16.gguf" --threads 1
done
