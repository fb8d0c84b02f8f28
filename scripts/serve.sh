#!/usr/bin/env bash
# Sets up (packages, Release build) and serves. Arguments go to `slabserve serve`; without
# --model the server uses ../shared/testdata/models/stories260K when it exists.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/slabserve serve "$@"
