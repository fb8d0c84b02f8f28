#!/usr/bin/env bash
# Sets up (Debian packages, Release build) and serves; arguments go to `slabserve serve`.
# Without --model it serves the tiny real model of the shared test data,
# ../shared/testdata/models/stories260K, with the built-in chatml template (the model has none of
# its own), so that every example in the README answers.
#   SLAB_SKIP_SETUP=1   skip the set-up (the README test does: it has built the binary already)
#   SLABSERVE=PATH      the binary to run (default build/slabserve)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${SLAB_SKIP_SETUP:-}" ] || scripts/setup.sh

has_model=0 has_template=0
for arg in "$@"; do
  case "$arg" in
    --model|--model=*) has_model=1 ;;
    --chat-template|--chat-template=*) has_template=1 ;;
  esac
done
args=("$@")
if [ "$has_model" -eq 0 ]; then
  default_model=../shared/testdata/models/stories260K
  if [ ! -f "$default_model/config.json" ]; then
    echo "serve.sh: no --model given and the default test model $default_model is absent;" \
         "pass --model DIR (a Hugging Face model folder)" >&2
    exit 2
  fi
  echo "serve.sh: no --model given: serving the tiny test model $default_model" \
       "(pass --model DIR to serve a real one)" >&2
  args=(--model "$default_model" "${args[@]}")
  [ "$has_template" -eq 1 ] || args+=(--chat-template chatml)
fi
exec "${SLABSERVE:-build/slabserve}" serve "${args[@]}"
