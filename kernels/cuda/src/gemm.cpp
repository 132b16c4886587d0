// cuBLASLt GEMM (see gemm.hpp). Descriptors are built per call (host microseconds);
// the algorithm the heuristic picks is cached per problem, so each distinct GEMM
// pays the heuristic query once.
#include "ztune/kernels/cuda/gemm.hpp"

#include <cublasLt.h>

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>

#include "ztune/kernels/cuda/check.hpp"

namespace ztune::kernels::cuda {
namespace {

template <typename T>
constexpr cudaDataType_t data_type();
template <>
constexpr cudaDataType_t data_type<float>() { return CUDA_R_32F; }
template <>
constexpr cudaDataType_t data_type<__half>() { return CUDA_R_16F; }
template <>
constexpr cudaDataType_t data_type<__nv_bfloat16>() { return CUDA_R_16BF; }

// Largest power of two (≤ 256) dividing the address: cuBLASLt's heuristic must not
// pick a kernel assuming more alignment than the pointers have.
std::uint32_t alignment_of(const void* p) {
  auto addr = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t a = 256;
  while (a > 1 && addr % a != 0) a /= 2;
  return a;
}

cublasLtEpilogue_t lt_epilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::none: return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::bias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::gelu_bias: return CUBLASLT_EPILOGUE_GELU_BIAS;
    case GemmEpilogue::gelu_aux_bias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// RAII owners of the cuBLASLt descriptors.
struct MatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  MatmulDesc(cublasComputeType_t compute, cudaDataType_t scale) {
    ZT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d, compute, scale));
  }
  ~MatmulDesc() { cublasLtMatmulDescDestroy(d); }
  MatmulDesc(const MatmulDesc&) = delete;
  MatmulDesc& operator=(const MatmulDesc&) = delete;
  template <typename V>
  void set(cublasLtMatmulDescAttributes_t attr, const V& value) {
    ZT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &value, sizeof(value)));
  }
};

struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  Layout(cudaDataType_t type, std::uint64_t rows, std::uint64_t cols, std::int64_t ld, const GemmBatch& batch,
         long long stride) {
    ZT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, rows, cols, ld));
    if (batch.count > 1) {
      const std::int32_t count = batch.count;
      const std::int64_t offset = stride;
      ZT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      ZT_CUBLAS_CHECK(
          cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset, sizeof(offset)));
    }
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(l); }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
};

struct Preference {
  cublasLtMatmulPreference_t p = nullptr;
  Preference() { ZT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&p)); }
  ~Preference() { cublasLtMatmulPreferenceDestroy(p); }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
  template <typename V>
  void set(cublasLtMatmulPreferenceAttributes_t attr, const V& value) {
    ZT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attr, &value, sizeof(value)));
  }
};

using AlgoKey = std::tuple<int, int, int, int, int, int, int, int, int, int, int, int, std::uint32_t, std::uint32_t,
                           std::uint32_t, std::uint32_t, int, long long, long long, long long, bool>;

}  // namespace

struct Gemm::Impl {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  std::mutex mutex;
  std::map<AlgoKey, cublasLtMatmulAlgo_t> algos;
};

Gemm::Gemm(std::size_t workspace_bytes) : impl_(std::make_unique<Impl>()) {
  ZT_CUBLAS_CHECK(cublasLtCreate(&impl_->handle));
  impl_->workspace_bytes = workspace_bytes;
  if (workspace_bytes > 0) ZT_CUDA_CHECK(cudaMalloc(&impl_->workspace, workspace_bytes));
}

Gemm::~Gemm() {
  if (impl_->workspace != nullptr) cudaFree(impl_->workspace);
  cublasLtDestroy(impl_->handle);
}

std::size_t Gemm::cached_algorithms() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->algos.size();
}

template <typename TIn, typename TOut>
void Gemm::run(const GemmShape& s, float alpha, const TIn* a, const TIn* b, float beta, TOut* c, cudaStream_t stream,
               const GemmEpilogueArgs& epilogue, const GemmBatch& batch) {
  ZT_REQUIRE(s.m > 0 && s.n > 0 && s.k > 0, "Gemm::run: m, n, k must be > 0");
  ZT_REQUIRE(s.lda >= (s.trans_a ? s.m : s.k) && s.ldb >= (s.trans_b ? s.k : s.n) && s.ldc >= s.n,
             "Gemm::run: row strides smaller than the rows they hold");
  ZT_REQUIRE(batch.count >= 1, "Gemm::run: batch count must be >= 1");
  ZT_REQUIRE(epilogue.kind == GemmEpilogue::none || epilogue.bias != nullptr, "Gemm::run: epilogue needs a bias");
  ZT_REQUIRE(epilogue.kind != GemmEpilogue::gelu_aux_bias ||
                 (epilogue.aux != nullptr && epilogue.aux_ld >= s.n && epilogue.aux_ld % 8 == 0),
             "Gemm::run: gelu_aux_bias needs aux with aux_ld >= N and a multiple of 8");
  ZT_REQUIRE(epilogue.kind == GemmEpilogue::none || batch.count == 1, "Gemm::run: epilogues are for unbatched GEMMs");

  const cudaDataType_t type = data_type<TIn>(), out_type = data_type<TOut>();
  const bool tf32 = std::is_same_v<TIn, float> && allow_tf32_;
  MatmulDesc desc(tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F);
  // Swapped operands (see gemm.hpp): A' = B, B' = A.
  const cublasOperation_t op_a = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  desc.set(CUBLASLT_MATMUL_DESC_TRANSA, op_a);
  desc.set(CUBLASLT_MATMUL_DESC_TRANSB, op_b);
  const cublasLtEpilogue_t ep = lt_epilogue(epilogue.kind);
  if (epilogue.kind != GemmEpilogue::none) {
    desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, ep);
    desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, epilogue.bias);
  }
  if (epilogue.kind == GemmEpilogue::gelu_aux_bias) {
    desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, epilogue.aux);
    const std::int64_t ld = epilogue.aux_ld;
    desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ld);
  }
  const auto u = [](int v) { return static_cast<std::uint64_t>(v); };
  Layout la(type, u(s.trans_b ? s.k : s.n), u(s.trans_b ? s.n : s.k), s.ldb, batch, batch.stride_b);
  Layout lb(type, u(s.trans_a ? s.m : s.k), u(s.trans_a ? s.k : s.m), s.lda, batch, batch.stride_a);
  Layout lc(out_type, u(s.n), u(s.m), s.ldc, batch, batch.stride_c);

  const std::uint32_t al_a = alignment_of(b), al_b = alignment_of(a), al_c = alignment_of(c);
  const std::uint32_t al_bias = epilogue.bias != nullptr ? alignment_of(epilogue.bias) : 256;
  const AlgoKey key{static_cast<int>(type) * 1000 + static_cast<int>(out_type), s.trans_a, s.trans_b, s.m, s.n, s.k, s.lda, s.ldb, s.ldc,
                    static_cast<int>(ep), beta != 0.0f, static_cast<int>(epilogue.aux_ld), al_a, al_b, al_c, al_bias,
                    batch.count, batch.stride_a, batch.stride_b, batch.stride_c, tf32};
  cublasLtMatmulAlgo_t algo{};
  {
    std::lock_guard lock(impl_->mutex);
    auto it = impl_->algos.find(key);
    if (it != impl_->algos.end()) {
      algo = it->second;
    } else {
      Preference pref;
      pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<std::uint64_t>(impl_->workspace_bytes));
      pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al_a);
      pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al_b);
      pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, al_c);
      pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al_c);
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      ZT_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(impl_->handle, desc.d, la.l, lb.l, lc.l, lc.l, pref.p, 1, &result,
                                                     &found));
      if (found == 0) {
        throw CudaError("Gemm::run: cuBLASLt has no algorithm for M=" + std::to_string(s.m) +
                        " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k) +
                        " (type " + std::to_string(static_cast<int>(type)) + ", epilogue " +
                        std::to_string(static_cast<int>(ep)) + ", alignments " + std::to_string(al_a) + "/" +
                        std::to_string(al_b) + "/" + std::to_string(al_c) + ")");
      }
      algo = result.algo;
      impl_->algos.emplace(key, algo);
    }
  }
  ZT_CUBLAS_CHECK(cublasLtMatmul(impl_->handle, desc.d, &alpha, b, la.l, a, lb.l, &beta, c, lc.l, c, lc.l, &algo,
                                 impl_->workspace, impl_->workspace_bytes, stream));
}

template void Gemm::run<float, float>(const GemmShape&, float, const float*, const float*, float, float*, cudaStream_t,
                                      const GemmEpilogueArgs&, const GemmBatch&);
template void Gemm::run<__half, __half>(const GemmShape&, float, const __half*, const __half*, float, __half*,
                                        cudaStream_t, const GemmEpilogueArgs&, const GemmBatch&);
template void Gemm::run<__nv_bfloat16, __nv_bfloat16>(const GemmShape&, float, const __nv_bfloat16*,
                                                      const __nv_bfloat16*, float, __nv_bfloat16*, cudaStream_t,
                                                      const GemmEpilogueArgs&, const GemmBatch&);
template void Gemm::run<__half, float>(const GemmShape&, float, const __half*, const __half*, float, float*,
                                       cudaStream_t, const GemmEpilogueArgs&, const GemmBatch&);
template void Gemm::run<__nv_bfloat16, float>(const GemmShape&, float, const __nv_bfloat16*, const __nv_bfloat16*,
                                              float, float*, cudaStream_t, const GemmEpilogueArgs&, const GemmBatch&);

}  // namespace ztune::kernels::cuda
