#pragma once
// GEMM through cuBLASLt, in the row-major shape of kernels/gemm.hpp (GemmShape):
// C[M,N] = alpha·op(A)[M,K]·op(B)[K,N] + beta·C, optionally batched with strides,
// optionally with an epilogue that saves a memory pass: + bias[N] (the Linear
// layer's bias), gelu(· + bias) (GPT-2's MLP; cuBLASLt's GELU is the tanh
// approximation, as kernels/gelu.hpp), gelu(· + bias) keeping the pre-activation
// in `aux` for the backward pass. Storage types float, __half, __nv_bfloat16, all
// with fp32 accumulation (CUBLAS_COMPUTE_32F); fp32 inputs may opt into TF32; 16-bit
// inputs may write an fp32 C (TIn = __half or __nv_bfloat16, TOut = float).
// Row-major → column-major: C_rowᵀ = op(B)ᵀ·op(A)ᵀ, so cuBLASLt sees m' = N,
// n' = M and the operands swapped; the bias vector runs along m', i.e. over N.
//
//   Gemm gemm;                       // one per stream user; owns its workspace
//   gemm.run<__nv_bfloat16>({false, false, n, oc, c, c, oc, oc}, 1.f, inp, w, 0.f, out, stream,
//                           {GemmEpilogue::bias, bias});
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ztune/kernels/gemm.hpp"

namespace ztune::kernels::cuda {

enum class GemmEpilogue : std::uint8_t { none, bias, gelu_bias, gelu_aux_bias };

struct GemmEpilogueArgs {
  GemmEpilogue kind = GemmEpilogue::none;
  const void* bias = nullptr;  // [N], of the output's type
  void* aux = nullptr;         // gelu_aux_bias: pre-activation [M, N] row-major, row stride aux_ld (≥ N, multiple of 8)
  long aux_ld = 0;
};

struct GemmBatch {
  int count = 1;
  long long stride_a = 0;  // elements between consecutive A matrices
  long long stride_b = 0;
  long long stride_c = 0;
};

class Gemm {
 public:
  /// Creates the cuBLASLt handle and a device workspace (cuBLASLt's recommended
  /// 32 MiB on Hopper).
  explicit Gemm(std::size_t workspace_bytes = std::size_t{32} << 20);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  /// fp32 inputs: TF32 tensor cores (faster, 10-bit mantissa products) or exact fp32.
  void set_allow_tf32(bool allow) { allow_tf32_ = allow; }

  template <typename TIn, typename TOut = TIn>
  void run(const GemmShape& s, float alpha, const TIn* a, const TIn* b, float beta, TOut* c, cudaStream_t stream,
           const GemmEpilogueArgs& epilogue = {}, const GemmBatch& batch = {});

  /// Heuristic queries made so far (one per distinct shape, type, epilogue and alignment).
  [[nodiscard]] std::size_t cached_algorithms() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool allow_tf32_ = false;
};

}  // namespace ztune::kernels::cuda
