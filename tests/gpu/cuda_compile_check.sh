#!/usr/bin/env bash
# CI-runnable compile check of issue 24's device code (no GPU needed): each CUDA
# source of the speed path is compiled separately for sm_80 and for sm_90 with every
# nvcc warning an error and the host compiler's -Wall -Wextra -Werror, so a warning
# or an architecture-specific break shows up on a machine without a device.
# Usage: cuda_compile_check.sh NVCC SOURCE_DIR CUDA_INCLUDE [CUDNN_INCLUDE]
set -euo pipefail
nvcc=$1 src=$2 cuda_inc=$3 cudnn_inc=${4:-}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
inc=(-I"$src/kernels/cuda/include" -I"$src/kernels/include" -isystem "$cuda_inc" -isystem /usr/include/eigen3)
variants=("-DZTUNE_HAVE_CUDNN=0")  # without cuDNN every call takes the flash kernels: that build must stay clean too
[[ -n "$cudnn_inc" ]] && variants+=("-DZTUNE_HAVE_CUDNN=1 -isystem $cudnn_inc")
for arch in 80 90; do
  for f in kernels/cuda/src/adamw.cu; do
    "$nvcc" -std=c++17 --expt-relaxed-constexpr --Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror \
      -gencode "arch=compute_$arch,code=sm_$arch" "${inc[@]}" -c "$src/$f" -o "$out/$(basename "$f").$arch.o"
    echo "sm_$arch: $f compiled without warnings"
  done
  # Host code of the speed path, through nvcc's host compiler as the build does.
  for v in "${variants[@]}"; do
    read -r -a cudnn <<<"$v"
    for f in kernels/cuda/src/cudnn_attention.cpp kernels/cuda/src/graph_capture.cpp; do
      "$nvcc" -std=c++17 -x cu --Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror \
        -gencode "arch=compute_$arch,code=sm_$arch" "${inc[@]}" "${cudnn[@]}" -c "$src/$f" \
        -o "$out/$(basename "$f").$arch.o"
      echo "sm_$arch: $f compiled without warnings (${cudnn[0]})"
    done
  done
done
