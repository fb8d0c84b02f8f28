#!/bin/sh
# Builds block_work against a checkout REPO with its build folder BUILD (libslab_kernels.a):
#   sh build.sh /work/main /work/main/build-dev OUT
set -e
here=$(dirname "$0")
python3 "$here/nop_tiles.py" "$1" /tmp/attention_amx_nop.cpp
g++ -O2 -std=c++20 -I"$1" -I"$1/include" "$here/block_work.cpp" /tmp/attention_amx_nop.cpp \
  "$2/libslab_kernels.a" "$2/libslab_runtime.a" -o "$3"
