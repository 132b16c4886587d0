#include "ztune/kernels/matmul.hpp"

#include "ztune/kernels/gemm.hpp"

namespace ztune::kernels::cpu {

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int n, int c, int oc,
                    ThreadPool* pool) {
  gemm({false, false, n, oc, c, c, oc, oc}, 1.0f, inp, weight, 0.0f, out, pool);
  if (bias == nullptr) return;
  for (int i = 0; i < n; ++i) {
    float* row = out + static_cast<long>(i) * oc;
    for (int j = 0; j < oc; ++j) row[j] += bias[j];
  }
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int n, int c, int oc, ThreadPool* pool) {
  if (dinp != nullptr) gemm({false, true, n, c, oc, oc, oc, c}, 1.0f, dout, weight, 1.0f, dinp, pool);
  gemm({true, false, c, oc, n, c, oc, oc}, 1.0f, inp, dout, 1.0f, dweight, pool);
  if (dbias == nullptr) return;
  for (int i = 0; i < n; ++i) {
    const float* row = dout + static_cast<long>(i) * oc;
    for (int j = 0; j < oc; ++j) dbias[j] += row[j];
  }
}

}  // namespace ztune::kernels::cpu
