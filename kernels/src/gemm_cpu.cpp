#include "ztune/kernels/gemm.hpp"

#include <Eigen/Core>

#include "ztune/kernels/thread_pool.hpp"

namespace ztune::kernels::cpu {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;
using Map = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;

// One slice of C: rows [r0, r1) and columns [c0, c1).
void gemm_block(const GemmShape& s, float alpha, const float* a, const float* b, float beta, float* c,
                std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) {
  const auto rows = static_cast<Eigen::Index>(r1 - r0), cols = static_cast<Eigen::Index>(c1 - c0);
  if (rows <= 0 || cols <= 0) return;
  Map cm(c + r0 * s.ldc + c0, rows, cols, Eigen::OuterStride<>(s.ldc));
  // op(A) rows [r0,r1): A stored [M,K] (rows) or [K,M] (columns when transposed).
  const float* ap = s.trans_a ? a + r0 : a + r0 * s.lda;
  const float* bp = s.trans_b ? b + c0 * s.ldb : b + c0;
  const Eigen::Index k = s.k;
  auto product = [&](const auto& opa, const auto& opb) {
    if (beta == 0.0f) {
      cm.noalias() = alpha * (opa * opb);
    } else {
      if (beta != 1.0f) cm *= beta;
      cm.noalias() += alpha * (opa * opb);
    }
  };
  auto with_b = [&](const auto& opa) {
    if (s.trans_b) {
      ConstMap bm(bp, cols, k, Eigen::OuterStride<>(s.ldb));
      product(opa, bm.transpose());
    } else {
      ConstMap bm(bp, k, cols, Eigen::OuterStride<>(s.ldb));
      product(opa, bm);
    }
  };
  if (s.trans_a) {
    ConstMap am(ap, k, rows, Eigen::OuterStride<>(s.lda));
    with_b(am.transpose());
  } else {
    ConstMap am(ap, rows, k, Eigen::OuterStride<>(s.lda));
    with_b(am);
  }
}

}  // namespace

void gemm(const GemmShape& s, float alpha, const float* a, const float* b, float beta, float* c,
          ThreadPool* pool) {
  // Below ~1 MFLOP the hand-off costs more than it saves.
  const double flops = 2.0 * s.m * s.n * s.k;
  const int parts = (pool == nullptr || flops < 1e6) ? 1 : pool->size();
  if (parts == 1) {
    gemm_block(s, alpha, a, b, beta, c, 0, s.m, 0, s.n);
    return;
  }
  // Split the longer side of C so that each slice keeps a GEMM-friendly shape.
  const bool split_rows = s.m >= s.n;
  pool->run(parts, [&](int part, int total) {
    if (split_rows) {
      auto [r0, r1] = split_range(s.m, part, total);
      gemm_block(s, alpha, a, b, beta, c, r0, r1, 0, s.n);
    } else {
      auto [c0, c1] = split_range(s.n, part, total);
      gemm_block(s, alpha, a, b, beta, c, 0, s.m, c0, c1);
    }
  });
}

void gemm_eigen_reference(int m, int n, int k, const float* a, const float* b, float* c) {
  Eigen::Map<const RowMat> am(a, m, k);
  Eigen::Map<const RowMat> bm(b, k, n);
  Eigen::Map<RowMat> cm(c, m, n);
  cm.noalias() = am * bm;
}

}  // namespace ztune::kernels::cpu
