#pragma once
// GEMM, row-major, in the shape of cuBLAS's gemm so the CUDA backend (cuBLASLt)
// can mirror it: C[M,N] = alpha · op(A)[M,K] · op(B)[K,N] + beta · C.
// op(X) = X or Xᵀ; lda/ldb/ldc are row strides (elements) of the stored matrices.
// The CPU version runs Eigen's GEMM on slices of C across a ThreadPool.
#include <cstdint>

namespace ztune::kernels {

class ThreadPool;

struct GemmShape {
  bool trans_a = false;
  bool trans_b = false;
  int m = 0;
  int n = 0;
  int k = 0;
  int lda = 0;
  int ldb = 0;
  int ldc = 0;
};

namespace cpu {

/// `pool` may be null (single thread). beta = 0 ignores C's old contents (NaNs included).
void gemm(const GemmShape& s, float alpha, const float* a, const float* b, float beta, float* c,
          ThreadPool* pool);

/// Row-major C[M,N] = A[M,K]·B[K,N] with Eigen's own product in one call (the
/// benchmark's baseline: what "plain Eigen" reaches on this machine).
void gemm_eigen_reference(int m, int n, int k, const float* a, const float* b, float* c);

}  // namespace cpu
}  // namespace ztune::kernels
