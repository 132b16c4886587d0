#!/usr/bin/env bash
# The one device script of the GPU backend (issue 7). On a machine with an NVIDIA
# GPU it builds the GPU parts, runs the GPU kernel tests (each kernel against its
# CPU reference), the backend equivalence and NCCL tests where they can be built,
# and the GPU benchmarks, then prints a short table. Sized for a few minutes on an
# H200 (the build dominates: sm_90 only).
#
#   scripts/gpu-check.sh --prepare   # here (no GPU needed): copy Eigen's and Catch2's
#                                    # headers into .gpu-deps/ for a machine without them
#   scripts/gpu-check.sh [OUTDIR]    # on the GPU machine; logs go to OUTDIR (default build/gpu-check)
#
# Two builds, the first that configures wins:
#  1. the full project (preset ci, CUDA arch 90) when its Debian dependencies are
#     installed: every GPU test, the CudaBackend equivalence and NCCL tests included;
#  2. scripts/gpu-check/CMakeLists.txt: only CUDA, Eigen and Catch2 headers: the
#     kernel tests and the benchmarks (it says that the others were not built).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

if [[ "${1:-}" == "--prepare" ]]; then
  mkdir -p .gpu-deps
  cp -r /usr/include/eigen3 .gpu-deps/ && cp -r /usr/include/catch2 .gpu-deps/
  grep -qx '/.gpu-deps/' .git/info/exclude 2>/dev/null || echo '/.gpu-deps/' >> .git/info/exclude
  echo "prepared .gpu-deps ($(du -sh .gpu-deps | cut -f1)); carry it to the GPU machine"
  exit 0
fi

OUT=${1:-$ROOT/build/gpu-check}
mkdir -p "$OUT"
ARCH=${ZTUNE_CUDA_ARCH:-90}
JOBS=$(nproc)
log() { printf '\n== %s\n' "$*"; }

log "device"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader || { echo "no GPU: nothing to check"; exit 77; }
nvcc --version | tail -1

log "build (sm_$ARCH)"
BUILD=""
start=$(date +%s)
if cmake --preset ci -B build/gpu-full -DZTUNE_BUILD_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES="$ARCH" >"$OUT/configure-full.log" 2>&1 \
   && grep -q "building the GPU backend" "$OUT/configure-full.log"; then
  if cmake --build build/gpu-full -j"$JOBS" --target test_gpu_kernels test_gpu_features test_gpu_backend_equivalence test_gpu_nccl \
       test_gpu_nccl_watchdog bench_gpu_kernels bench_gpt_train ztune-worker ztune ztune-calibrate-worker \
       >"$OUT/build.log" 2>&1; then
    BUILD=build/gpu-full
  fi
fi
if [[ -z "$BUILD" ]]; then
  echo "full project build unavailable here (see $OUT/configure-full.log); stand-alone kernel build"
  DEPS=${ZTUNE_GPU_DEPS:-$ROOT/.gpu-deps}
  [[ -f "$DEPS/catch2/catch.hpp" && -d "$DEPS/eigen3" ]] || { echo "missing $DEPS (run scripts/gpu-check.sh --prepare where the headers are, and carry .gpu-deps)"; exit 1; }
  cmake -S scripts/gpu-check -B build/gpu-kernels -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
        -DZTUNE_GPU_DEPS="$DEPS" >"$OUT/configure-standalone.log" 2>&1 || { tail -30 "$OUT/configure-standalone.log"; exit 1; }
  cmake --build build/gpu-kernels -j"$JOBS" >"$OUT/build.log" 2>&1 || { grep -E "error|FAILED" "$OUT/build.log" | head -40; exit 1; }
  BUILD=build/gpu-kernels
fi
echo "built in $(( $(date +%s) - start )) s ($BUILD)"

find_bin() { find "$BUILD" -type f -name "$1" -perm -u+x | head -1; }
declare -A RESULT
run_test() {  # name, command...
  local name=$1; shift
  local t0=$(date +%s)
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  case $rc in 0) RESULT[$name]="passed";; 77) RESULT[$name]="skipped";; *) RESULT[$name]="FAILED (rc $rc)";; esac
  RESULT[$name]+=" in $(( $(date +%s) - t0 )) s"
  grep -E "test cases|assertions|FAIL|outside tolerance|watchdog|skipped" "$OUT/$name.log" | tail -15
}

log "GPU kernel tests"
run_test gpu_kernels "$(find_bin test_gpu_kernels)"
log "issue 10 kernel tests (1-bit compression, block-sparse attention)"
run_test gpu_features "$(find_bin test_gpu_features)"
if [[ "$BUILD" == build/gpu-full ]]; then
  log "CudaBackend vs CpuBackend"
  run_test gpu_backend_equivalence "$(find_bin test_gpu_backend_equivalence)"
  log "NCCL (one rank per GPU)"
  run_test gpu_nccl "$(find_bin test_gpu_nccl)"
  log "NCCL watchdog"
  run_test gpu_nccl_watchdog timeout 60 "$(find_bin test_gpu_nccl_watchdog)"
  log "ztune-worker --backend cuda vs cpu (tiny model: fp32, bf16, fp16 + loss scaling)"
  run_test gpu_worker env ZTUNE_DATA_DIR="$ROOT/data" python3 tests/gpu/worker_cuda_vs_cpu.py "$(find_bin ztune-worker)" \
    "mpirun --allow-run-as-root --oversubscribe"
  grep -E "^cuda_|loss scale" "$OUT/gpu_worker.log"
  # Issue 8 on the GPU: one training run of GPT-2 1.5B (bf16, 16 steps) on
  # h200-box predicted with the catalog profile, then calibrate --backend cuda
  # (quick) refits the profile to the microbenchmarks and that run's record, and
  # the same plan is predicted again: before/after beside the measurement.
  log "calibration loop on the GPU (GPT-2 1.5B, bf16)"
  ZT="$(find_bin ztune)"
  CAL_ENV=(env XDG_DATA_HOME="$OUT/xdg" ZTUNE_DATA_DIR="$ROOT/data")
  PLAN=(--cluster h200-box --model gpt2-1.5b --dp 1 --micro-batch 8 --global-batch 32 --recompute selective
        --precision bf16)
  run_test gpu_run "${CAL_ENV[@]}" "$ZT" run "${PLAN[@]}" --steps 16 --record "$OUT/gpt2-1.5b.record.json" --json
  run_test gpu_calibrate "${CAL_ENV[@]}" "$ZT" calibrate --cluster h200-box --backend cuda --np 1 --quick --no-db \
    --out "$OUT/h200-calibrated.json" --records "$OUT/gpt2-1.5b.record.json"
  if [[ -f "$OUT/gpt2-1.5b.record.json" && -f "$OUT/h200-calibrated.json" ]]; then
    measured=$(python3 -c "import json;print(json.load(open('$OUT/gpt2-1.5b.record.json'))['step_time_s'])")
    before=$("${CAL_ENV[@]}" "$ZT" predict "${PLAN[@]}" --json | python3 -c "import json,sys;print(json.load(sys.stdin)['time']['iteration_s'])")
    after=$("${CAL_ENV[@]}" "$ZT" predict "${PLAN[@]}" --profile "$OUT/h200-calibrated.json" --json |
            python3 -c "import json,sys;print(json.load(sys.stdin)['time']['iteration_s'])")
    python3 -c "m,b,a=$measured,$before,$after;print(f'gpt2-1.5b bf16 mb8x4: measured {m:.4f} s, predicted {b:.4f} s before ({100*(b-m)/m:+.1f}%), {a:.4f} s after the fit ({100*(a-m)/m:+.1f}%)')" \
      | tee "$OUT/calibration.txt"
  fi
else
  for t in gpu_backend_equivalence gpu_nccl gpu_nccl_watchdog gpu_worker gpu_run gpu_calibrate; do
    RESULT[$t]="not built (needs the full project's dependencies)"
  done
fi

log "kernel benchmark (bf16, GPT-3 XL shapes)"
"$(find_bin bench_gpu_kernels)" 2>&1 | tee "$OUT/bench_gpu_kernels.log"
log "GPT training benchmark (bf16, seq 1024)"
"$(find_bin bench_gpt_train)" 2>&1 | tee "$OUT/bench_gpt_train.log"

log "summary"
for t in gpu_kernels gpu_features gpu_backend_equivalence gpu_nccl gpu_nccl_watchdog gpu_worker gpu_run gpu_calibrate; do printf '%-26s %s\n' "$t" "${RESULT[$t]}"; done
grep -E "^gpt" "$OUT/bench_gpt_train.log" || true
cat "$OUT/calibration.txt" 2>/dev/null || true
[[ "${RESULT[gpu_kernels]}" == passed* && "${RESULT[gpu_features]}" == passed* ]]
