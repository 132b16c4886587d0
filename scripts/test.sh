#!/usr/bin/env bash
# The README's test command: installs dependencies, builds (CI preset: warnings
# are errors), and runs the whole CTest suite; then builds the libFuzzer targets
# (fuzz preset, clang) and runs each for ZTUNE_FUZZ_SECONDS (10) s (scripts/fuzz.sh).
# Ends with CTest's summary line of the fuzz run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset ci >/dev/null
cmake --build --preset ci -- -k 0
cd build/ci
ctest --output-on-failure --timeout 600 -j "$(nproc)"
cd ../..
bash scripts/fuzz.sh
