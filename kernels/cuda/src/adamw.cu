// Multi-tensor AdamW (see adamw.hpp). adamw_multi_tensor's tensor list travels by value as a kernel
// argument (under the 4 KiB parameter limit of sm_70); block b finds its tensor by
// the prefix sums of chunk counts and updates one chunk of kChunk elements.
#include <cmath>

#include "common.cuh"
#include "ztune/kernels/cuda/adamw.hpp"

namespace ztune::kernels::cuda {
namespace {
using detail::from_f32;
using detail::to_f32;
constexpr int kThreads = 256;
constexpr long kChunk = 16384;

template <typename G, typename P>
struct TensorList {
  AdamWTensor<G, P> t[kAdamWTensorsPerLaunch];
  int first_block[kAdamWTensorsPerLaunch + 1];  // prefix sums of per-tensor chunk counts
  int count;
};

struct Hyper {
  float lr, beta1, beta2, eps, weight_decay, bc1, bc2, grad_scale;
};

// One element of the decoupled-weight-decay Adam update (Loshchilov & Hutter
// 2019) in fp32, the states read widened and written rounded (identity for
// fp32 ones), the 16-bit copy written from the master as stored: the one
// definition both launchers (the tensor list and the chunk table) run.
template <typename G, typename P, typename M, typename S>
__device__ inline void adamw_element(const AdamWTensor<G, P, M, S>& t, long i, const Hyper& h) {
    const float g = to_f32(t.grad[i]) * h.grad_scale;
    const float m = h.beta1 * to_f32(t.m[i]) + (1.0f - h.beta1) * g;
    const float v = h.beta2 * to_f32(t.v[i]) + (1.0f - h.beta2) * g * g;
    t.m[i] = from_f32<S>(m);
    t.v[i] = from_f32<S>(v);
    const float mhat = m / h.bc1, vhat = v / h.bc2;
    float p = to_f32(t.master[i]);
    p -= h.lr * (mhat / (sqrtf(vhat) + h.eps) + h.weight_decay * p);
    const M stored = from_f32<M>(p);
    t.master[i] = stored;
    if (t.param != nullptr) t.param[i] = from_f32<P>(to_f32(stored));
}

template <typename G, typename P>
__global__ void adamw_kernel(const TensorList<G, P> list, const Hyper h) {
  const int block = static_cast<int>(blockIdx.x);
  int k = 0;
  while (k + 1 < list.count && block >= list.first_block[k + 1]) ++k;
  const AdamWTensor<G, P>& t = list.t[k];
  const long begin = static_cast<long>(block - list.first_block[k]) * kChunk;
  const long end = min(t.n, begin + kChunk);
  for (long i = begin + threadIdx.x; i < end; i += blockDim.x) {
    adamw_element(t, i, h);
  }
}

// adamw_chunked: row b of the device chunk table names the tensor and the range.
template <typename G, typename P, typename M, typename S>
__global__ void adamw_chunked_kernel(const AdamWTensor<G, P, M, S>* tensors, const TensorChunk* chunks,
                                     const Hyper h) {
  const TensorChunk c = chunks[blockIdx.x];
  const AdamWTensor<G, P, M, S> t = tensors[c.tensor];
  const long end = static_cast<long>(c.begin) + c.length;
  for (long i = static_cast<long>(c.begin) + threadIdx.x; i < end; i += blockDim.x) {
    adamw_element(t, i, h);
  }
}

Hyper make_hyper(const AdamWParams& h, float grad_scale) {
  return Hyper{h.lr,
               h.beta1,
               h.beta2,
               h.eps,
               h.weight_decay,
               1.0f - std::pow(h.beta1, static_cast<float>(h.step)),  // bias corrections as the CPU reference
               1.0f - std::pow(h.beta2, static_cast<float>(h.step)),
               grad_scale};
}

}  // namespace

template <typename G, typename P, typename M, typename S>
void adamw_chunked(const AdamWTensor<G, P, M, S>* tensors, const TensorChunk* chunks, int chunk_count,
                   const AdamWParams& h, float grad_scale, cudaStream_t stream) {
  detail::NvtxRange range("adamw_chunked");
  ZT_REQUIRE(chunk_count >= 0 && (chunk_count == 0 || (tensors != nullptr && chunks != nullptr)),
             "adamw_chunked: bad chunk table");
  ZT_REQUIRE(h.step >= 1, "adamw_chunked: AdamW step t is 1-based");
  if (chunk_count == 0) return;
  adamw_chunked_kernel<G, P, M, S><<<static_cast<unsigned>(chunk_count), kThreads, 0, stream>>>(
      tensors, chunks, make_hyper(h, grad_scale));
  ZT_CHECK_LAUNCH("adamw_chunked_kernel");
}

template <typename G, typename P>
void adamw_multi_tensor(const AdamWTensor<G, P>* tensors, int count, const AdamWParams& h, float grad_scale,
                        cudaStream_t stream) {
  detail::NvtxRange range("adamw_multi_tensor");
  ZT_REQUIRE(count >= 0 && (count == 0 || tensors != nullptr), "adamw_multi_tensor: bad tensor list");
  ZT_REQUIRE(h.step >= 1, "adamw_multi_tensor: AdamW step t is 1-based");
  static_assert(sizeof(TensorList<G, P>) <= 4096, "kernel parameters must fit sm_70's 4 KiB");
  const Hyper hyper = make_hyper(h, grad_scale);
  for (int start = 0; start < count; start += kAdamWTensorsPerLaunch) {
    TensorList<G, P> list{};
    list.count = 0;
    long blocks = 0;
    for (int k = start; k < count && list.count < kAdamWTensorsPerLaunch; ++k) {
      const AdamWTensor<G, P>& t = tensors[k];
      ZT_REQUIRE(t.n >= 0 && t.master != nullptr && t.m != nullptr && t.v != nullptr && t.grad != nullptr,
                 "adamw_multi_tensor: tensor needs master, m, v and grad");
      if (t.n == 0) continue;
      list.t[list.count] = t;
      list.first_block[list.count] = static_cast<int>(blocks);
      blocks += detail::ceil_div(t.n, kChunk);
      ++list.count;
    }
    ZT_REQUIRE(blocks < (1L << 31), "adamw_multi_tensor: too many chunks for one launch");
    list.first_block[list.count] = static_cast<int>(blocks);
    if (list.count == 0) continue;
    adamw_kernel<G, P><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(list, hyper);
    ZT_CHECK_LAUNCH("adamw_kernel");
  }
}

#define ZT_ADAMW_CHUNKED(G, P, M, S)                                                                      \
  template void adamw_chunked<G, P, M, S>(const AdamWTensor<G, P, M, S>*, const TensorChunk*, int, \
                                          const AdamWParams&, float, cudaStream_t);
ZT_ADAMW_CHUNKED(float, float, float, float)
ZT_ADAMW_CHUNKED(float, __nv_bfloat16, float, float)
ZT_ADAMW_CHUNKED(float, __half, float, float)
ZT_ADAMW_CHUNKED(__nv_bfloat16, __nv_bfloat16, float, float)
ZT_ADAMW_CHUNKED(__half, __half, float, float)
// 16-bit states (adamw.hpp; executor_support.hpp adam_states_native).
#define ZT_ADAMW_CHUNKED_STATES(H)             \
  ZT_ADAMW_CHUNKED(float, H, float, H)         \
  ZT_ADAMW_CHUNKED(float, H, H, float)         \
  ZT_ADAMW_CHUNKED(float, H, H, H)             \
  ZT_ADAMW_CHUNKED(H, H, float, H)             \
  ZT_ADAMW_CHUNKED(H, H, H, float)             \
  ZT_ADAMW_CHUNKED(H, H, H, H)                 \
  ZT_ADAMW_CHUNKED(float, float, float, H)
ZT_ADAMW_CHUNKED_STATES(__nv_bfloat16)
ZT_ADAMW_CHUNKED_STATES(__half)
#undef ZT_ADAMW_CHUNKED_STATES
#undef ZT_ADAMW_CHUNKED

template void adamw_multi_tensor<float, float>(const AdamWTensor<float, float>*, int, const AdamWParams&, float,
                                               cudaStream_t);
template void adamw_multi_tensor<float, __nv_bfloat16>(const AdamWTensor<float, __nv_bfloat16>*, int,
                                                       const AdamWParams&, float, cudaStream_t);
template void adamw_multi_tensor<float, __half>(const AdamWTensor<float, __half>*, int, const AdamWParams&, float,
                                                cudaStream_t);
template void adamw_multi_tensor<__nv_bfloat16, __nv_bfloat16>(const AdamWTensor<__nv_bfloat16, __nv_bfloat16>*, int,
                                                               const AdamWParams&, float, cudaStream_t);
template void adamw_multi_tensor<__half, __half>(const AdamWTensor<__half, __half>*, int, const AdamWParams&, float,
                                                 cudaStream_t);

}  // namespace ztune::kernels::cuda
