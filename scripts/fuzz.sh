#!/usr/bin/env bash
# The libFuzzer targets of ztune's readers (fuzz/, issue 20 part 6), built with the
# `fuzz` preset (clang, -fsanitize=fuzzer,address,undefined) into build/fuzz.
#
#   scripts/fuzz.sh                     every target for ZTUNE_FUZZ_SECONDS (10) s, as CTest tests
#                                       (what scripts/test.sh runs); exit 1 on any finding
#   scripts/fuzz.sh --long TARGET [-- LIBFUZZER_FLAGS...]
#                                       one target until Ctrl-C (or the flags' -max_total_time /
#                                       -runs); e.g. scripts/fuzz.sh --long cluster -- -runs=10000000
#   scripts/fuzz.sh --list              the targets
#
# The corpus grows in build/fuzz/fuzz/corpus/TARGET (kept between runs, never
# committed); a finding is written to build/fuzz/fuzz/findings/TARGET-crash-… (or
# -timeout-, -oom-, -leak-). Reproduce one with build/fuzz/fuzz/fuzz_TARGET FILE;
# each one fixed becomes a Catch2 regression test in tests/vocab/ or tests/cli/.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(cluster model hf_config hardware_profile engine_profile plan_file run_record)
mode=short target=""
case "${1:-}" in
  --long) mode=long; target="${2:?usage: scripts/fuzz.sh --long TARGET [-- FLAGS...]}"; shift 2
          [ "${1:-}" = "--" ] && shift ;;
  --list) printf '%s\n' "${targets[@]}"; exit 0 ;;
  "") ;;
  *) echo "usage: scripts/fuzz.sh [--long TARGET [-- LIBFUZZER_FLAGS...] | --list]" >&2; exit 2 ;;
esac
if [ "$mode" = long ] && ! printf '%s\n' "${targets[@]}" | grep -qx "$target"; then
  echo "scripts/fuzz.sh: no target \"$target\"; targets: ${targets[*]}" >&2; exit 2
fi
seconds="${ZTUNE_FUZZ_SECONDS:-10}"
cmake --preset fuzz -DZTUNE_FUZZ_SECONDS="$seconds" >/dev/null
cmake --build --preset fuzz
dir=build/fuzz/fuzz
if [ "$mode" = short ]; then
  cd build/fuzz
  exec ctest --output-on-failure -L fuzz -j "$(nproc)"
fi
exec "$dir/fuzz_$target" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -dict=fuzz/json.dict \
  -artifact_prefix="$dir/findings/$target-" "$@" "$dir/corpus/$target" "$dir/seeds/$target"
