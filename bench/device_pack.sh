#!/bin/sh
# Builds and packs what bench/device_check.sh runs on the 16-core device machine (no package
# registry there), into .device-pack.tar.xz at the repository root:
#   LLAMA_CPP=DIR sh bench/device_pack.sh
# DIR is a llama.cpp tree with two static builds (the peer; llama-cpp-python 0.3.36 vendors
# 0c1e570: `pip download llama-cpp-python==0.3.36 --no-deps --no-binary :all:`):
#   build-portable  GGML_NATIVE=OFF, AVX-512 (+VBMI, VNNI, BF16) and GGML_AMX_TILE/INT8/BF16=ON,
#                   BUILD_SHARED_LIBS=OFF, targets llama-bench llama-quantize
#   build-noamx     the same without the AMX options, target llama-bench (the AMX build's
#                   quantized matmul stops with SIGILL on the device's VM)
# Without LLAMA_CPP the pack has slabserve's programs only, and device_check.sh's peer rows fail.
# The pack is compressed because the tree and the carried paths travel within 64 MiB (31 MB of
# the pack is ICU data).
set -eu
root=$(git rev-parse --show-toplevel)
cd "$root"
build=${BUILD:-build-bench}
cmake -S . -B "$build" -DSLAB_BUILD_BENCH=ON -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$build" -j"$(nproc)" --target slab_unit_tests slabserve bench_linear_quant bench_linear_bf16 \
  bench_model bench_attention bench_attention_block bench_thread_pool bench_engine
rm -rf .device-pack .device-pack.tar.xz
../shared/tools/device-pack.sh "$build/tests/slab_unit_tests" "$build/slabserve" "$build/bench/bench_linear_quant" \
  "$build/bench/bench_linear_bf16" "$build/bench/bench_model" "$build/bench/bench_attention" \
  "$build/bench/bench_attention_block" "$build/bench/bench_thread_pool" "$build/bench/bench_engine"
if [ -n "${LLAMA_CPP:-}" ]; then
  cp "$LLAMA_CPP/build-portable/bin/llama-bench" "$LLAMA_CPP/build-portable/bin/llama-quantize" .device-pack/bin/
  cp "$LLAMA_CPP/build-noamx/bin/llama-bench" .device-pack/bin/llama-bench-noamx
  for b in .device-pack/bin/llama-*; do
    ldd "$b" | awk '/=> \// {print $3}' | grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
      while read -r lib; do cp -Lu "$lib" .device-pack/lib/; done
  done
  cp -r "$LLAMA_CPP/gguf-py" .device-pack/
else
  echo "device_pack: no LLAMA_CPP: the pack has no llama.cpp peer" >&2
fi
cp -r ../shared/testdata/tokenizers/llama2 .device-pack/tokenizer
# The real stories260K model (1 MB) for the unit tests' model cases (SLAB_TESTDATA there).
mkdir -p .device-pack/testdata/models
cp -r ../shared/testdata/models/stories260K .device-pack/testdata/models/
tar cJf .device-pack.tar.xz .device-pack
grep -qxF /.device-pack.tar.xz "$(git rev-parse --git-dir)/info/exclude" ||
  echo /.device-pack.tar.xz >> "$(git rev-parse --git-dir)/info/exclude"
du -h .device-pack.tar.xz
