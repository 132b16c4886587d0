# Sourced by scripts/gpu-check.sh (and its test, tests/scripts/gpu_wheels_test.sh):
# where the build finds NCCL and cuDNN on a GPU machine. The CUDA toolkit's first (CMake
# looks there itself); else PyTorch's nvidia-nccl / nvidia-cudnn wheels, which the device
# image's torch depends on.

# wheel_dir NAME: the folder of PyTorch's nvidia-NAME wheel (nvidia/NAME, with include/
# and lib/), or nothing. The CUDA 13 wheels (nvidia-nccl-cu13, nvidia-cudnn-cu13) ship no
# __init__.py: nvidia.NAME is a namespace package, whose __file__ is None, so the folder
# is read from its __path__.
wheel_dir() {
  python3 -c "import importlib, sys; m = importlib.import_module('nvidia.' + sys.argv[1]); print(list(m.__path__)[0])" \
    "$1" 2>/dev/null || true
}

# find_nccl: CMake looks in the CUDA toolkit first (CMakeLists.txt); when the toolkit
# has no NCCL, point it at PyTorch's (the nvidia-nccl wheel: include/ and libnccl.so.2).
find_nccl() {
  local cuda_root; cuda_root=$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")")
  if compgen -G "$cuda_root/lib*/libnccl.so*" >/dev/null || compgen -G "$cuda_root/targets/*/lib/libnccl.so*" >/dev/null; then
    echo "NCCL: the CUDA toolkit's ($cuda_root)"; return 0
  fi
  local wheel; wheel=$(wheel_dir nccl)
  if [[ -n "$wheel" && -f "$wheel/include/nccl.h" ]]; then
    local lib; lib=$(ls "$wheel"/lib/libnccl.so* 2>/dev/null | head -1)
    if [[ -n "$lib" ]]; then
      echo "NCCL: PyTorch's nvidia-nccl wheel ($lib)"
      CONFIGURE_ARGS+=(-DZTUNE_NCCL_LIBRARY="$lib" -DZTUNE_NCCL_INCLUDE="$wheel/include")
      export LD_LIBRARY_PATH=$wheel/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      return 0
    fi
  fi
  echo "NCCL: neither in the toolkit ($cuda_root) nor in python3's nvidia.nccl: CMake searches its default paths"
}

# find_cudnn: cuDNN 9 for the fused attention (issue 24): the toolkit's, else PyTorch's
# nvidia-cudnn wheel (ZTUNE_CUDNN_ROOT, read by kernels/cuda/CMakeLists.txt). Exports
# ZTUNE_CUDNN_ROOT and LD_LIBRARY_PATH for the wheel; prints which.
find_cudnn() {
  if ls "${CUDA_HOME:-/usr/local/cuda}"/lib*/libcudnn.so* >/dev/null 2>&1 || [[ -n "${ZTUNE_CUDNN_ROOT:-}" ]]; then
    return 0
  fi
  local cudnn_wheel; cudnn_wheel=$(wheel_dir cudnn)
  if [[ -n "$cudnn_wheel" && -d "$cudnn_wheel/include" ]]; then
    export ZTUNE_CUDNN_ROOT=$cudnn_wheel LD_LIBRARY_PATH=$cudnn_wheel/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    echo "cuDNN: PyTorch's nvidia-cudnn wheel ($cudnn_wheel)"
  else
    echo "cuDNN: not in the toolkit nor in python3's nvidia.cudnn: the fused attention takes the flash kernels"
  fi
}
