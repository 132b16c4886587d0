#include "ztune/model/flops.hpp"

#include "ztune/model/sparse_attention.hpp"

namespace ztune {

namespace {

// Attention score GEMMs QKᵀ and PV: 2 × 2·s²·b·h (all heads).
double attention_core_flops(const Transformer& m, double b) {
  const double s = m.seq_len;
  return 4.0 * s * s * b * m.hidden;
}

}  // namespace

double layer_forward_flops(const Transformer& m, double micro_batch, double attention_density) {
  const double tokens = static_cast<double>(m.seq_len) * micro_batch;
  const double h = m.hidden;
  const double kvd = static_cast<double>(m.kv_heads) * m.head_dim();
  const double f_in = m.activation == Activation::swiglu ? 2.0 * m.ffn_hidden : m.ffn_hidden;
  const double qkv = 2.0 * tokens * h * (h + 2.0 * kvd);
  const double proj = 2.0 * tokens * h * h;
  const double mlp = 2.0 * tokens * h * f_in + 2.0 * tokens * m.ffn_hidden * h;
  // A sliding window keeps attended_fraction() of the causal pairs: the model's
  // attention math shrinks by that share (what the kernel computes is
  // hardware_flops_per_iteration's concern).
  return qkv + proj + mlp + attention_core_flops(m, micro_batch) * attention_density * m.attended_fraction();
}

// The logits GEMM on the positions that predict (a masked LM: its share).
double head_forward_flops(const Transformer& m, double micro_batch) {
  return 2.0 * m.seq_len * m.head_token_fraction * micro_batch * static_cast<double>(m.hidden) * m.vocab;
}

double model_flops_per_iteration(const Transformer& m, double global_batch, double attention_density) {
  return 3.0 * (m.layers * layer_forward_flops(m, global_batch, attention_density) +
                head_forward_flops(m, global_batch));
}

double hardware_flops_per_iteration(const Transformer& m, const Plan& p) {
  const double b = static_cast<double>(p.global_batch);
  const double density = attention_density(m, p);
  // A flash kernel skips the key blocks outside the window; the standard
  // kernel computes every score and masks the ones outside it.
  const double kept = fused_attention(p.attention) ? m.attended_fraction() : 1.0;
  const double core = attention_core_flops(m, b) * density * kept;
  // Full recomputation repeats the linear layers (density 0: no attention term)
  // and the kernel's core (torchtitan's every-other-layer policy: half the
  // layers; Megatron's block method: the layers it recomputes).
  double extra = whole_layer_recompute_share(p) * recomputed_layers_total(p, m.layers) *
                 (layer_forward_flops(m, b, 0.0) + core);
  if (p.recompute == Recompute::selective) {
    const double tokens = static_cast<double>(m.seq_len) * b;
    const double h = m.hidden, f = m.ffn_hidden;
    const double kvd = static_cast<double>(m.kv_heads) * m.head_dim();
    switch (p.recompute_policy) {
      case SelectivePolicy::attention:
      case SelectivePolicy::dots: extra = m.layers * core; break;  // only the core (dots saves every matmul)
      // wk, wo and w3 (w2 without a gated MLP): 2·tokens·h·(kvd + h + f).
      case SelectivePolicy::alternate_mm: extra = m.layers * 2.0 * tokens * h * (kvd + h + f); break;
      // The MLP input projections (gate and up with SwiGLU) and the core.
      case SelectivePolicy::mlp_in:
        extra = m.layers * (2.0 * tokens * h * (m.activation == Activation::swiglu ? 2.0 * f : f) + core);
        break;
      case SelectivePolicy::alternate_layers: break;  // the whole-layer share, above
    }
  }
  // A flash kernel's backward recomputes QKᵀ (Dao et al. 2022, Alg. 4): half the core.
  if (fused_attention(p.attention)) extra += m.layers * core / 2.0;
  // The passes' own attention work: the model's, or all of the scores when the kernel masks the window.
  const double masked = m.layers * 3.0 * attention_core_flops(m, b) * density * (kept - m.attended_fraction());
  return model_flops_per_iteration(m, b, density) + masked + extra;
}

}  // namespace ztune
