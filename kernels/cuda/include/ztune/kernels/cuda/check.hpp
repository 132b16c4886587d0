#pragma once
// Error checking for CUDA runtime, cuBLAS(Lt) and launch preconditions. Library
// code throws (STYLE.md "What not to copy": llm.c exits from library code; we do
// not): CudaError for a failed runtime/library call, std::invalid_argument for a
// launcher called against its stated preconditions (a programmer error that must
// not vanish under NDEBUG, since nothing runs these kernels in CI).
//
//   ZT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream));
//   ZT_REQUIRE(c % 4 == 0, "layernorm_forward: c must be a multiple of 4");
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace ztune::kernels::cuda {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Throws CudaError naming `what` (the call's text) and `where` (file:line) unless ok.
void check_cuda(cudaError_t status, const char* what, const char* where);
/// cuBLAS/cuBLASLt status (cublasStatus_t as int, so this header needs no cuBLAS).
void check_cublas(int status, const char* what, const char* where);
/// After a kernel launch: cudaGetLastError(), naming the kernel.
void check_launch(const char* kernel, const char* where);
[[noreturn]] void precondition_failed(const char* condition, const std::string& message, const char* where);

/// Number of CUDA devices visible (0 when there is no driver or no device).
int device_count() noexcept;

}  // namespace ztune::kernels::cuda

#define ZT_STRINGIFY2(x) #x
#define ZT_STRINGIFY(x) ZT_STRINGIFY2(x)
#define ZT_WHERE __FILE__ ":" ZT_STRINGIFY(__LINE__)
#define ZT_CUDA_CHECK(call) ::ztune::kernels::cuda::check_cuda((call), #call, ZT_WHERE)
#define ZT_CUBLAS_CHECK(call) ::ztune::kernels::cuda::check_cublas(static_cast<int>(call), #call, ZT_WHERE)
#define ZT_CHECK_LAUNCH(name) ::ztune::kernels::cuda::check_launch(name, ZT_WHERE)
#define ZT_REQUIRE(cond, msg) \
  do { \
    if (!(cond)) ::ztune::kernels::cuda::precondition_failed(#cond, (msg), ZT_WHERE); \
  } while (false)
