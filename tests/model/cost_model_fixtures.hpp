#pragma once
// Hand-built inputs shared by the cost-model tests: a plain GPT shape and an
// A100 cluster with round figures, so expected values can be worked by hand.
#include <optional>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"

namespace ztune::test {

/// A GPT with 4h FFN, GELU, layernorm, learned positions, biases, tied embeddings.
inline Transformer gpt(int layers, int hidden, int heads, int seq, int vocab) {
  Transformer t;
  t.name = "gpt";
  t.layers = layers;
  t.hidden = hidden;
  t.heads = heads;
  t.kv_heads = heads;
  t.ffn_hidden = 4 * hidden;
  t.vocab = vocab;
  t.seq_len = seq;
  t.global_batch = 1;
  t.train_tokens = 1;
  return t;
}

/// DGX A100 80GB-like nodes: 8 GPUs, 300 GB/s NVSwitch, 8 × 25 GB/s NICs.
inline Cluster a100_nodes(int nodes) {
  Cluster c;
  c.name = "test-a100";
  c.nodes = nodes;
  c.node.gpus = 8;
  c.node.gpu = {"A100-SXM4-80GB", 80, 312, 312, 19.5, 2039};
  c.node.host_memory_gb = 2048;
  c.node.cpu_cores = 128;
  c.node.cpu_adam_gparams_per_s = 2.7;
  c.node.pcie_bandwidth_gbps = 25;
  c.node.nvme_bandwidth_gbps = 40;
  c.node.nvme_size_tb = 30;
  c.intra_node = {"nvswitch", 300, 5, 0, "nvswitch", std::nullopt};
  c.inter_node = {"ib", 25, 10, 8, "fat-tree", std::nullopt};
  return c;
}

/// dp × tp GPUs at ZeRO `zero`, micro_batch × grad_accum sequences per GPU
/// and step (the global batch follows); everything else the Plan default.
inline Plan zero_plan(int dp, int tp, int zero, int micro_batch, int grad_accum) {
  Plan p;
  p.dp = dp;
  p.tp = tp;
  p.zero_stage = zero;
  p.micro_batch = micro_batch;
  p.grad_accum = grad_accum;
  p.global_batch = static_cast<std::int64_t>(dp) * micro_batch * grad_accum;
  return p;
}

}  // namespace ztune::test
