#!/usr/bin/env bash
# The README's test command: installs dependencies, builds (CI preset: warnings
# are errors), and runs the whole CTest suite. Ends with CTest's summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset ci >/dev/null
cmake --build --preset ci -- -k 0
cd build/ci
ctest --output-on-failure --timeout 600 -j "$(nproc)"
