#pragma once
// GptStage's private pieces, shared by gpt_stage.cpp (the stage: embedding,
// head, micro-batch bookkeeping) and gpt_block.cpp (one transformer block).
#include "ztune/executor/gpt_stage.hpp"

namespace ztune::executor {

// Parameter ids in the store; -1 where the model has no such tensor (biases).
struct GptStage::BlockParams {
  int unit = 0;
  int ln1_w = -1, ln1_b = -1, qkv_w = -1, qkv_b = -1, proj_w = -1, proj_b = -1, ln2_w = -1, ln2_b = -1, fc_w = -1,
      fc_b = -1, mproj_w = -1, mproj_b = -1;
};

// What one block keeps for backward (shapes per rank; Ns = rows()).
struct GptStage::LayerActs {
  Buffer ln1, mean1, rstd1;  // [Ns, C], [Ns], [Ns] (no mean under RMSNorm)
  Buffer qkv;                // [N, QKVl] (after RoPE)
  Buffer att;                // [B, NH/tp, T, T] (absent under selective recomputation)
  Buffer atty;               // [N, C/tp]
  Buffer x2;                 // [Ns, C] residual after attention
  Buffer ln2, mean2, rstd2;  // [Ns, C], [Ns], [Ns]
  Buffer fc, gelu;           // [N, FCl], [N, F/tp] (gelu holds SwiGLU's output too)
};

}  // namespace ztune::executor
