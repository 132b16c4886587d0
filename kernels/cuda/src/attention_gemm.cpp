// The unfused attention (see attention.hpp): strided-batched cuBLASLt GEMMs over
// the B·NH heads around the causal softmax; the workspace holds the head-major
// copies. Backward follows kernels/attention_cpu.cpp's equations:
// dS = P∘(dP − rowsum(P∘dP)), dQ = dS·K/√hd, dK = dSᵀ·Q/√hd, dV = Pᵀ·dO.
#include <cmath>

#include "ztune/kernels/cuda/attention.hpp"
#include "ztune/kernels/cuda/check.hpp"
#include "ztune/kernels/cuda/gemm.hpp"

namespace ztune::kernels::cuda {
namespace {

struct Dims {
  int bh, hd;
  long long n;   // elements of one of Q, K, V: B·T·C
  long long tt;  // T·T
  long long td;  // T·hd
};

Dims dims_of(int b, int t, int c, int nh) {
  ZT_REQUIRE(b > 0 && t > 0 && nh > 0 && c % nh == 0, "attention: need b, t, nh > 0 and nh | c");
  const int hd = c / nh;
  return {b * nh, hd, static_cast<long long>(b) * t * c, static_cast<long long>(t) * t,
          static_cast<long long>(t) * hd};
}

}  // namespace

std::size_t attention_workspace_elems(int b, int t, int c, int nh) {
  const Dims d = dims_of(b, t, c, nh);
  return static_cast<std::size_t>(7 * d.n + d.bh * d.tt);
}

template <typename T>
void attention_forward(Gemm& gemm, T* out, T* att, const T* qkv, T* workspace, int b, int t, int c, int nh,
                       cudaStream_t stream) {
  const Dims d = dims_of(b, t, c, nh);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.hd));
  T* q = workspace;
  T* k = q + d.n;
  T* v = k + d.n;
  T* o = v + d.n;
  to_heads(q, qkv, 3L * c, b, t, nh, d.hd, stream);
  to_heads(k, qkv + c, 3L * c, b, t, nh, d.hd, stream);
  to_heads(v, qkv + 2L * c, 3L * c, b, t, nh, d.hd, stream);
  // att = scale·Q·Kᵀ per head.
  gemm.run<T>({false, true, t, t, d.hd, d.hd, d.hd, t}, scale, q, k, 0.0f, att, stream, {}, {d.bh, d.td, d.td, d.tt});
  causal_softmax_forward(att, d.bh, t, stream);
  // O = P·V per head.
  gemm.run<T>({false, false, t, d.hd, t, t, d.hd, d.hd}, 1.0f, att, v, 0.0f, o, stream, {}, {d.bh, d.tt, d.td, d.td});
  from_heads(out, c, o, b, t, nh, d.hd, false, stream);
}

template <typename T>
void attention_backward(Gemm& gemm, T* dqkv, const T* dout, const T* qkv, const T* att, T* workspace, int b, int t,
                        int c, int nh, cudaStream_t stream) {
  const Dims d = dims_of(b, t, c, nh);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.hd));
  T* q = workspace;
  T* k = q + d.n;
  T* v = k + d.n;
  T* dout_h = v + d.n;
  T* dq = dout_h + d.n;
  T* dk = dq + d.n;
  T* dv = dk + d.n;
  T* datt = dv + d.n;
  to_heads(q, qkv, 3L * c, b, t, nh, d.hd, stream);
  to_heads(k, qkv + c, 3L * c, b, t, nh, d.hd, stream);
  to_heads(v, qkv + 2L * c, 3L * c, b, t, nh, d.hd, stream);
  to_heads(dout_h, dout, c, b, t, nh, d.hd, stream);
  // dP = dO·Vᵀ, then dS in place.
  gemm.run<T>({false, true, t, t, d.hd, d.hd, d.hd, t}, 1.0f, dout_h, v, 0.0f, datt, stream, {},
              {d.bh, d.td, d.td, d.tt});
  causal_softmax_backward(datt, att, d.bh, t, stream);
  // dV = Pᵀ·dO, dQ = scale·dS·K, dK = scale·dSᵀ·Q.
  gemm.run<T>({true, false, t, d.hd, t, t, d.hd, d.hd}, 1.0f, att, dout_h, 0.0f, dv, stream, {},
              {d.bh, d.tt, d.td, d.td});
  gemm.run<T>({false, false, t, d.hd, t, t, d.hd, d.hd}, scale, datt, k, 0.0f, dq, stream, {},
              {d.bh, d.tt, d.td, d.td});
  gemm.run<T>({true, false, t, d.hd, t, t, d.hd, d.hd}, scale, datt, q, 0.0f, dk, stream, {},
              {d.bh, d.tt, d.td, d.td});
  from_heads(dqkv, 3L * c, dq, b, t, nh, d.hd, true, stream);
  from_heads(dqkv + c, 3L * c, dk, b, t, nh, d.hd, true, stream);
  from_heads(dqkv + 2L * c, 3L * c, dv, b, t, nh, d.hd, true, stream);
}

template void attention_forward<float>(Gemm&, float*, float*, const float*, float*, int, int, int, int, cudaStream_t);
template void attention_forward<__half>(Gemm&, __half*, __half*, const __half*, __half*, int, int, int, int,
                                        cudaStream_t);
template void attention_forward<__nv_bfloat16>(Gemm&, __nv_bfloat16*, __nv_bfloat16*, const __nv_bfloat16*,
                                               __nv_bfloat16*, int, int, int, int, cudaStream_t);
template void attention_backward<float>(Gemm&, float*, const float*, const float*, const float*, float*, int, int, int,
                                        int, cudaStream_t);
template void attention_backward<__half>(Gemm&, __half*, const __half*, const __half*, const __half*, __half*, int, int,
                                         int, int, cudaStream_t);
template void attention_backward<__nv_bfloat16>(Gemm&, __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                                const __nv_bfloat16*, __nv_bfloat16*, int, int, int, int,
                                                cudaStream_t);

}  // namespace ztune::kernels::cuda
