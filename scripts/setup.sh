#!/usr/bin/env bash
# Installs slabserve's build dependencies from Debian packages (only those missing) and builds
# the Release binary into build/. Safe to run again.
#   scripts/setup.sh                 install what is missing, build build/slabserve
#   scripts/setup.sh --deps-only     install only
#   --test-deps                      also what the tests need (Python venv, nginx, numactl, curl, iproute2)
# Extra arguments after -- go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake pkg-config xz-utils
  libcpp-httplib-dev nlohmann-json3-dev libsentencepiece-dev libspdlog-dev libcli11-dev
  catch2 libhwloc-dev hwloc libpcre2-dev libicu-dev libbenchmark-dev
)

# What the tests need beyond the build: Python with venv for the openai-client test; nginx,
# numactl and curl for scripts/launch-multi.sh and its test (Debian starts the packaged nginx
# service on port 80; the launcher runs its own nginx and does not use it); iproute2's `ip netns`
# for the multi-host test's network namespaces (it skips where they cannot be made, e.g. not root).
TEST_PACKAGES=(python3 python3-venv nginx numactl curl iproute2)

deps_only=0
test_deps=0
cmake_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --deps-only) deps_only=1 ;;
    --test-deps) test_deps=1 ;;
    --) shift; cmake_args=("$@"); break ;;
    *) echo "setup.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done

wanted=("${PACKAGES[@]}")
[ "$test_deps" -eq 1 ] && wanted+=("${TEST_PACKAGES[@]}")
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
[ "$deps_only" -eq 1 ] && exit 0

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${cmake_args[@]}"
cmake --build build -j"$(nproc)" --target slabserve
