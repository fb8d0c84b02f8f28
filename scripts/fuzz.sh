#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) and runs each for a while.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     default 120 s, every target
# Corpora grow under build-fuzz/corpus/<target>; a crash leaves its input in build-fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-120}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_http_request fuzz_request_body fuzz_chat_template fuzz_gguf fuzz_grammar)

scripts/setup.sh --deps-only
if ! command -v clang++ >/dev/null || [ ! -d /usr/lib/llvm-14/lib/clang/14.0.6/lib/linux ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev
fi
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLAB_FUZZ=ON -DSLAB_BUILD_TESTS=OFF
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]}"

for t in "${targets[@]}"; do
  corpus="build-fuzz/corpus/$t"
  mkdir -p "$corpus"
  seeds=("$PWD/tests/fuzz/seeds/$t")
  # The real chat templates of the shared test data seed the template fuzzer (read, not copied).
  if [ "$t" = fuzz_chat_template ] && [ -d ../shared/testdata/chat-templates ]; then
    seeds+=("$(cd ../shared/testdata/chat-templates && pwd)")
  fi
  echo "== $t for $seconds s"
  (cd build-fuzz && "tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
     "corpus/$t" "${seeds[@]}")
done
