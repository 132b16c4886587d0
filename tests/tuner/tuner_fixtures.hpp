#pragma once
// Shared inputs for the tuner tests: catalog entries and the published model
// shapes the tests need (each with its source).
#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/transformer.hpp"

namespace ztune::test {

/// A 13B GPT: 40 layers, hidden 5120, 40 heads of 128, GPT-2 vocabulary,
/// sequence 1024 — the GPT-3 paper's 13B shape (Brown et al. 2020, Table 2.1,
/// d_model rounded to 5120 = 40 × 128), the size ZeRO-Offload (Ren et al. 2021)
/// trains on one V100-32GB. Ψ ≈ 12·L·h² + V·h ≈ 12.8e9.
Transformer gpt_13b();

/// One GPU of the V100 workstation (a V100-32GB).
Cluster one_v100();

/// GPT models of Korthikanti et al. 2022, Table 3 (sequence 2048, vocabulary 51200).
Transformer korthikanti_model(int layers, int hidden, int heads, std::int64_t global_batch);

}  // namespace ztune::test
