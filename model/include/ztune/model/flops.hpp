#pragma once
// FLOPs per training iteration, counted from the GEMM shapes the cost model
// times (op_costs.hpp), so MFU and the kernel times agree on what a FLOP is.
// For a GPT (FFN 4h, GeLU, no GQA) they reduce to the published forms:
//   model FLOPs    72·B·s·L·h²·(1 + s/(6h) + V/(12·h·L))   Korthikanti et al. 2022, eq. 7
//   full recompute 96·B·s·L·h²·(1 + s/(6h) + V/(16·L·h))   Narayanan et al. 2021 (hardware FLOPs)
// Norms, softmax and other elementwise work are not counted (as in both papers).
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"

namespace ztune {

/// Forward FLOPs of one transformer layer for `tokens` = s·b tokens (whole layer, no tensor split).
/// Block-sparse attention computes `attention_density` of the score GEMMs
/// (sparse_attention.hpp; 1 = dense), so its model FLOPs are those it does.
[[nodiscard]] double layer_forward_flops(const Transformer& m, double micro_batch, double attention_density = 1.0);
/// Forward FLOPs of the LM head (logits GEMM) for one micro-batch.
[[nodiscard]] double head_forward_flops(const Transformer& m, double micro_batch);
/// Model FLOPs of one iteration of `global_batch` sequences: 3 × forward (forward + 2× backward).
[[nodiscard]] double model_flops_per_iteration(const Transformer& m, double global_batch,
                                               double attention_density = 1.0);
/// Hardware FLOPs: model FLOPs plus the recomputed forward (selective: the
/// attention score GEMMs; full: every layer's forward; the head is never recomputed).
[[nodiscard]] double hardware_flops_per_iteration(const Transformer& m, const Plan& p);

}  // namespace ztune
