#!/usr/bin/env bash
# Sets up and runs every test: a Release build with warnings as errors runs the whole ctest suite,
# then an ASan+UBSan build runs the unit tests.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh --deps-only --test-deps
jobs="$(nproc)"

# The openai Python client and jsonschema for the HTTP integration tests, and PyYAML for the
# Kubernetes manifest check, in a venv of its own.
if [ ! -x build-ci/venv/bin/python ]; then
  python3 -m venv build-ci/venv
fi
build-ci/venv/bin/python -m pip install -q --disable-pip-version-check openai jsonschema pyyaml

echo "== Release build (-Werror), all tests"
cmake -S . -B build-ci -DCMAKE_BUILD_TYPE=Release -DSLAB_WERROR=ON -DPython3_EXECUTABLE="$PWD/build-ci/venv/bin/python"
cmake --build build-ci -j"$jobs"
ctest --test-dir build-ci --output-on-failure -j"$jobs"

echo "== ASan+UBSan build (-Werror), unit tests"
# -O1 -g1 (line tables: sanitizer reports keep file:line) instead of RelWithDebInfo's -O2 -g: the
# instrumented compile took ~1300 s of CPU and takes ~1000 now; the unit tests ran at about the
# same speed (3 of the slowest, alternating: 43/36 s at -O2, 44/42 s at -O1).
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DSLAB_WERROR=ON -DSLAB_SANITIZE=ON
# Only what the unit label runs: the server binary, the integration tests and the example are not
# run here, and skipping them keeps the whole script inside CI's time budget.
cmake --build build-asan -j"$jobs" --target slab_unit_tests
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -L unit
