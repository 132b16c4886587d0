#pragma once
// LayerNorm over the last dimension (Ba, Kiros, Hinton 2016):
// y = (x − μ)·rstd·w + b with rstd = 1/sqrt(var + eps), var the biased variance.
// mean[N] and rstd[N] are saved for backward. See conventions.hpp (backward +=).
namespace ztune::kernels::cpu {

/// GPT-2's LayerNorm epsilon (Hugging Face GPT2Config.layer_norm_epsilon; also
/// GPT-NeoX's layer_norm_eps and torch.nn.LayerNorm's default). A model's own
/// epsilon is Transformer::norm_eps; callers without a model pass this one.
inline constexpr float kLayerNormEps = 1e-5f;

/// Example: layernorm_forward(y, mean, rstd, x, w, b, rows, c, kLayerNormEps).
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int n, int c, float eps);
/// dinp += ∂L/∂x, dweight += Σ dout·x̂, dbias += Σ dout.
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int n, int c);

}  // namespace ztune::kernels::cpu

namespace ztune::kernels::cpu {

/// RMSNorm (Zhang & Sennrich 2019, eq. 4; Llama's norm): y = x·rstd·w with
/// rstd = 1/sqrt(mean(x²) + eps). rstd[N] is saved for backward.
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int n, int c, float eps);
/// dinp += rstd·(dx̂ − x̂·mean(dx̂·x̂)) with x̂ = x·rstd, dx̂ = dout·w; dweight += Σ_rows dout·x̂.
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int n, int c);

}  // namespace ztune::kernels::cpu
