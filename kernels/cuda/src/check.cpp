#include "ztune/kernels/cuda/check.hpp"

#include <cublas_api.h>

namespace ztune::kernels::cuda {

void check_cuda(cudaError_t status, const char* what, const char* where) {
  if (status == cudaSuccess) return;
  throw CudaError(std::string(where) + ": " + what + " failed: " + cudaGetErrorName(status) + " (" +
                  cudaGetErrorString(status) + ")");
}

void check_cublas(int status, const char* what, const char* where) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(std::string(where) + ": " + what + " failed: " +
                  cublasGetStatusName(static_cast<cublasStatus_t>(status)) + " (" +
                  cublasGetStatusString(static_cast<cublasStatus_t>(status)) + ")");
}

void check_launch(const char* kernel, const char* where) {
  const cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return;
  throw CudaError(std::string(where) + ": launch of " + kernel + " failed: " + cudaGetErrorName(status) + " (" +
                  cudaGetErrorString(status) + ")");
}

void precondition_failed(const char* condition, const std::string& message, const char* where) {
  throw std::invalid_argument(std::string(where) + ": " + message + " (precondition " + condition + " is false)");
}

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error so later calls report their own
    return 0;
  }
  return n;
}

}  // namespace ztune::kernels::cuda
