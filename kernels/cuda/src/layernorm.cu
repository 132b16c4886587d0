// LayerNorm and RMSNorm (see layernorm.hpp). Row statistics: one warp per row,
// fp32. Parameter gradients: a column-sum kernel (32 columns × 8 row lanes per
// block, fp32 atomics across row chunks), as bias_backward.
#include "common.cuh"
#include "ztune/kernels/cuda/layernorm.hpp"

namespace ztune::kernels::cuda {
namespace {
using detail::ceil_div;
using detail::from_f32;
using detail::to_f32;
constexpr int kWarpsPerBlock = 8;

// kLayerNorm: subtract the mean and add the bias; else RMSNorm (mean 0, no bias).
template <typename T, bool kLayerNorm>
__global__ void norm_forward_kernel(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias,
                                    int n, int c, float eps) {
  const int row = static_cast<int>(blockIdx.x) * kWarpsPerBlock + static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (row >= n) return;
  const T* x = inp + static_cast<long>(row) * c;
  float m = 0.0f;
  if (kLayerNorm) {
    for (int j = lane; j < c; j += 32) m += to_f32(x[j]);
    m = detail::warp_sum(m) / static_cast<float>(c);
  }
  float var = 0.0f;
  for (int j = lane; j < c; j += 32) {
    const float d = to_f32(x[j]) - m;
    var += d * d;
  }
  var = detail::warp_sum(var) / static_cast<float>(c);
  const float s = rsqrtf(var + eps);
  T* o = out + static_cast<long>(row) * c;
  for (int j = lane; j < c; j += 32) {
    float y = (to_f32(x[j]) - m) * s * to_f32(weight[j]);
    if (kLayerNorm) y += to_f32(bias[j]);
    o[j] = from_f32<T>(y);
  }
  if (lane == 0) {
    if (kLayerNorm) mean[row] = m;
    rstd[row] = s;
  }
}

// dx = rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)) (LayerNorm) or rstd·(dx̂ − x̂·mean(dx̂·x̂)) (RMSNorm).
template <typename T, bool kLayerNorm>
__global__ void norm_backward_input_kernel(T* dinp, const T* dout, const T* inp, const T* weight, const float* mean,
                                           const float* rstd, int n, int c) {
  const int row = static_cast<int>(blockIdx.x) * kWarpsPerBlock + static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (row >= n) return;
  const long off = static_cast<long>(row) * c;
  const float m = kLayerNorm ? mean[row] : 0.0f, s = rstd[row];
  float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
  for (int j = lane; j < c; j += 32) {
    const float xhat = (to_f32(inp[off + j]) - m) * s;
    const float dnorm = to_f32(weight[j]) * to_f32(dout[off + j]);
    dnorm_mean += dnorm;
    dnorm_norm_mean += dnorm * xhat;
  }
  dnorm_mean = kLayerNorm ? detail::warp_sum(dnorm_mean) / static_cast<float>(c) : 0.0f;
  dnorm_norm_mean = detail::warp_sum(dnorm_norm_mean) / static_cast<float>(c);
  for (int j = lane; j < c; j += 32) {
    const float xhat = (to_f32(inp[off + j]) - m) * s;
    const float dnorm = to_f32(weight[j]) * to_f32(dout[off + j]);
    dinp[off + j] = from_f32<T>(to_f32(dinp[off + j]) + (dnorm - dnorm_mean - xhat * dnorm_norm_mean) * s);
  }
}

// dweight[j] += Σ dout·x̂; dbias[j] += Σ dout (dbias null for RMSNorm).
template <typename T, bool kLayerNorm>
__global__ void norm_backward_params_kernel(float* dweight, float* dbias, const T* dout, const T* inp,
                                            const float* mean, const float* rstd, int n, int c, int rows_per_chunk) {
  __shared__ float part_w[8][33];
  __shared__ float part_b[8][33];
  const int col = static_cast<int>(blockIdx.x) * 32 + static_cast<int>(threadIdx.x);
  const int row0 = static_cast<int>(blockIdx.y) * rows_per_chunk;
  const int row1 = min(n, row0 + rows_per_chunk);
  float sw = 0.0f, sb = 0.0f;
  if (col < c) {
    for (int r = row0 + static_cast<int>(threadIdx.y); r < row1; r += 8) {
      const long i = static_cast<long>(r) * c + col;
      const float g = to_f32(dout[i]);
      const float xhat = (to_f32(inp[i]) - (kLayerNorm ? mean[r] : 0.0f)) * rstd[r];
      sw += g * xhat;
      sb += g;
    }
  }
  part_w[threadIdx.y][threadIdx.x] = sw;
  part_b[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y != 0 || col >= c) return;
  float tw = 0.0f, tb = 0.0f;
  for (int k = 0; k < 8; ++k) {
    tw += part_w[k][threadIdx.x];
    tb += part_b[k][threadIdx.x];
  }
  if (gridDim.y == 1) {
    dweight[col] += tw;
    if (kLayerNorm) dbias[col] += tb;
  } else {
    atomicAdd(dweight + col, tw);
    if (kLayerNorm) atomicAdd(dbias + col, tb);
  }
}

template <typename T, bool kLayerNorm>
void launch_param_grads(float* dweight, float* dbias, const T* dout, const T* inp, const float* mean,
                        const float* rstd, int n, int c, cudaStream_t stream) {
  const int col_blocks = ceil_div(c, 32);
  const int chunks = max(1, min(ceil_div(n, 256), ceil_div(1024, col_blocks)));
  const int rows_per_chunk = ceil_div(n, chunks);
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(ceil_div(n, rows_per_chunk)));
  norm_backward_params_kernel<T, kLayerNorm><<<grid, dim3(32, 8), 0, stream>>>(dweight, dbias, dout, inp, mean, rstd,
                                                                             n, c, rows_per_chunk);
  ZT_CHECK_LAUNCH("norm_backward_params_kernel");
}

unsigned row_blocks(int n) { return static_cast<unsigned>(ceil_div(n, kWarpsPerBlock)); }

}  // namespace

template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int n, int c,
                       float eps, cudaStream_t stream) {
  detail::NvtxRange range("layernorm_forward");
  ZT_REQUIRE(n >= 0 && c > 0 && eps > 0.0f, "layernorm_forward: need n >= 0, c > 0, eps > 0");
  ZT_REQUIRE(mean != nullptr && rstd != nullptr && bias != nullptr, "layernorm_forward: mean, rstd, bias required");
  if (n == 0) return;
  norm_forward_kernel<T, true><<<row_blocks(n), kWarpsPerBlock * 32, 0, stream>>>(out, mean, rstd, inp, weight, bias,
                                                                                  n, c, eps);
  ZT_CHECK_LAUNCH("norm_forward_kernel<layernorm>");
}

template <typename T>
void layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight,
                        const float* mean, const float* rstd, int n, int c, cudaStream_t stream) {
  detail::NvtxRange range("layernorm_backward");
  ZT_REQUIRE(n >= 0 && c > 0, "layernorm_backward: need n >= 0 and c > 0");
  ZT_REQUIRE(dweight != nullptr && dbias != nullptr, "layernorm_backward: dweight and dbias required");
  if (n == 0) return;
  if (dinp != nullptr) {
    norm_backward_input_kernel<T, true><<<row_blocks(n), kWarpsPerBlock * 32, 0, stream>>>(dinp, dout, inp, weight,
                                                                                           mean, rstd, n, c);
    ZT_CHECK_LAUNCH("norm_backward_input_kernel<layernorm>");
  }
  launch_param_grads<T, true>(dweight, dbias, dout, inp, mean, rstd, n, c, stream);
}

template <typename T>
void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, int n, int c, float eps, cudaStream_t stream) {
  detail::NvtxRange range("rmsnorm_forward");
  ZT_REQUIRE(n >= 0 && c > 0 && eps > 0.0f, "rmsnorm_forward: need n >= 0, c > 0, eps > 0");
  if (n == 0) return;
  norm_forward_kernel<T, false><<<row_blocks(n), kWarpsPerBlock * 32, 0, stream>>>(out, nullptr, rstd, inp, weight,
                                                                                   nullptr, n, c, eps);
  ZT_CHECK_LAUNCH("norm_forward_kernel<rmsnorm>");
}

template <typename T>
void rmsnorm_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, const float* rstd, int n,
                      int c, cudaStream_t stream) {
  detail::NvtxRange range("rmsnorm_backward");
  ZT_REQUIRE(n >= 0 && c > 0 && dweight != nullptr, "rmsnorm_backward: need n >= 0, c > 0 and dweight");
  if (n == 0) return;
  if (dinp != nullptr) {
    norm_backward_input_kernel<T, false><<<row_blocks(n), kWarpsPerBlock * 32, 0, stream>>>(dinp, dout, inp, weight,
                                                                                            nullptr, rstd, n, c);
    ZT_CHECK_LAUNCH("norm_backward_input_kernel<rmsnorm>");
  }
  launch_param_grads<T, false>(dweight, nullptr, dout, inp, nullptr, rstd, n, c, stream);
}

#define ZT_INSTANTIATE(T)                                                                                         \
  template void layernorm_forward<T>(T*, float*, float*, const T*, const T*, const T*, int, int, float,           \
                                     cudaStream_t);                                                              \
  template void layernorm_backward<T>(T*, float*, float*, const T*, const T*, const T*, const float*,            \
                                      const float*, int, int, cudaStream_t);                                     \
  template void rmsnorm_forward<T>(T*, float*, const T*, const T*, int, int, float, cudaStream_t);               \
  template void rmsnorm_backward<T>(T*, float*, const T*, const T*, const T*, const float*, int, int, cudaStream_t);
ZT_FOR_EACH_DTYPE(ZT_INSTANTIATE)
#undef ZT_INSTANTIATE

}  // namespace ztune::kernels::cuda
