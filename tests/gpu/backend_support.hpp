#pragma once
// Shared by the CudaBackend tests: the storage type of a CUDA 16-bit element
// type, and the options of a backend whose GEMMs run in that type.
#include <cuda_fp16.h>

#include <type_traits>

#include "ztune/executor/cuda/cuda_backend.hpp"

namespace ztune::executor::test {

template <typename H>
constexpr StorageDtype storage_of() {
  return std::is_same_v<H, __half> ? StorageDtype::fp16 : StorageDtype::bf16;
}

/// Device 0, its GEMMs on 16-bit tensor cores of storage type d.
inline cuda::CudaBackendOptions gemms_in(StorageDtype d) {
  return {0, d == StorageDtype::bf16 ? cuda::GemmPrecision::bf16 : cuda::GemmPrecision::fp16};
}

}  // namespace ztune::executor::test
