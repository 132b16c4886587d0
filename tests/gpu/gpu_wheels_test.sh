#!/usr/bin/env bash
# scripts/gpu-wheels.sh (sourced by scripts/gpu-check.sh on the GPU machine): where the
# build finds NCCL and cuDNN. Oracle: the file layout of PyTorch's CUDA 13 wheels as
# published on PyPI (nvidia-nccl-cu13 2.28.9: nvidia/nccl/include/nccl.h,
# nvidia/nccl/lib/libnccl.so.2; nvidia-cudnn-cu13 9.19.1.2: nvidia/cudnn/include/cudnn.h,
# nvidia/cudnn/lib/libcudnn.so.9; neither ships an __init__.py, so nvidia.nccl and
# nvidia.cudnn are namespace packages), rebuilt here as empty files; the CUDA 12 wheels'
# layout (with __init__.py) too.
#   gpu_wheels_test.sh REPO
set -u
REPO=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() {  # check WHAT EXPECTED ACTUAL
  if [[ "$3" != *"$2"* ]]; then echo "FAIL: $1: expected '$2' in '$3'"; fail=1; else echo "ok: $1"; fi
}
wheel() {  # wheel SITE NAME LIB [init]
  mkdir -p "$1/nvidia/$2/include" "$1/nvidia/$2/lib"
  touch "$1/nvidia/$2/include/$2.h" "$1/nvidia/$2/lib/$3"
  if [[ -n "${4:-}" ]]; then touch "$1/nvidia/__init__.py" "$1/nvidia/$2/__init__.py"; fi
}
toolkit() {  # toolkit ROOT [libs...]: an nvcc and, under lib64, the libraries named
  mkdir -p "$1/bin" "$1/lib64"
  printf '#!/bin/sh\necho fake nvcc\n' >"$1/bin/nvcc"
  chmod +x "$1/bin/nvcc"
  local root=$1; shift
  for l in "$@"; do touch "$root/lib64/$l"; done
}
run() {  # run TOOLKIT SITE: find_nccl and find_cudnn in a clean shell; prints their output and state
  env -i PATH="$1/bin:/usr/bin:/bin" HOME="$T" CUDA_HOME="$1" PYTHONPATH="$2" bash -c '
    source "'"$REPO"'/scripts/gpu-wheels.sh"
    CONFIGURE_ARGS=()
    find_nccl
    find_cudnn
    echo "args=${CONFIGURE_ARGS[*]}"
    echo "cudnn_root=${ZTUNE_CUDNN_ROOT:-}"
    echo "ld=${LD_LIBRARY_PATH:-}"'
}

# A toolkit without NCCL or cuDNN (PyTorch's images put both in wheels), CUDA 13 wheels.
toolkit "$T/bare"
wheel "$T/cu13" nccl libnccl.so.2
wheel "$T/cu13" cudnn libcudnn.so.9
out=$(run "$T/bare" "$T/cu13")
check "cu13 NCCL from the wheel" "NCCL: PyTorch's nvidia-nccl wheel ($T/cu13/nvidia/nccl/lib/libnccl.so.2)" "$out"
check "cu13 NCCL configure args" "args=-DZTUNE_NCCL_LIBRARY=$T/cu13/nvidia/nccl/lib/libnccl.so.2 -DZTUNE_NCCL_INCLUDE=$T/cu13/nvidia/nccl/include" "$out"
check "cu13 cuDNN from the wheel" "cuDNN: PyTorch's nvidia-cudnn wheel ($T/cu13/nvidia/cudnn)" "$out"
check "cu13 cuDNN root exported" "cudnn_root=$T/cu13/nvidia/cudnn" "$out"
check "cu13 loader path" "ld=$T/cu13/nvidia/cudnn/lib:$T/cu13/nvidia/nccl/lib" "$out"

# CUDA 12 wheels: regular packages.
wheel "$T/cu12" nccl libnccl.so.2 init
wheel "$T/cu12" cudnn libcudnn.so.9 init
out=$(run "$T/bare" "$T/cu12")
check "cu12 NCCL from the wheel" "NCCL: PyTorch's nvidia-nccl wheel ($T/cu12/nvidia/nccl/lib/libnccl.so.2)" "$out"
check "cu12 cuDNN root exported" "cudnn_root=$T/cu12/nvidia/cudnn" "$out"

# A toolkit that has both: the wheels are not used, nothing is exported.
toolkit "$T/full" libnccl.so.2 libcudnn.so.9
out=$(run "$T/full" "$T/cu13")
check "toolkit NCCL first" "NCCL: the CUDA toolkit's ($T/full)" "$out"
check "toolkit cuDNN first" "cudnn_root=
" "$out"$'\n'
check "no configure args" "args=
" "$out"$'\n'

# Neither: said plainly, the build goes on (CMake's default paths; the flash kernels).
out=$(run "$T/bare" "$T/none")
check "no NCCL anywhere" "NCCL: neither in the toolkit ($T/bare) nor in python3's nvidia.nccl" "$out"
check "no cuDNN anywhere" "cuDNN: not in the toolkit nor in python3's nvidia.cudnn" "$out"
exit $fail
