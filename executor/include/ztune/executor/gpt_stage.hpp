#pragma once
// One pipeline stage (or one model chunk of it) of a GPT-2 (Radford et al. 2019): token + position
// embeddings (first stage), blocks of pre-LN causal self-attention and GELU MLP,
// final LN and the LM head tied to wte with the cross-entropy loss (last stage).
// The same stage trains the Llama family's variations (Touvron et al. 2023), each
// on its own as the Transformer says: RMSNorm, SwiGLU MLP, rotary positions
// instead of wpe (RoPE on Q and K after the QKV projection), grouped-query
// attention (K/V heads repeated for the dense kernels), no biases, an untied
// lm_head; and GPT-NeoX's partial rotary (rotary_fraction) and parallel
// attention and MLP (parallel_residual).
// Tensor parallelism after Megatron-LM (Shoeybi et al. 2019, §3): column-parallel
// c_attn/c_fc, row-parallel c_proj (all-reduce of the output; f/g operators),
// vocabulary-parallel embedding and cross-entropy. Sequence parallelism after
// Korthikanti et al. 2022 §4.2.2: the residual stream is split into tp chunks of
// rows; all-gather before the column-parallel GEMMs, reduce-scatter after the
// row-parallel ones. Recomputation (§5): selective drops the attention
// probabilities and recomputes them; full keeps only each block's input.
// Rows are the B·T tokens of the micro-batch in order; a sequence-parallel rank
// holds rows [tp_rank·N/tp, (tp_rank+1)·N/tp). With context parallelism (cp > 1)
// T is this rank's seq_len/cp rows of each sequence, its two load-balanced
// chunks (ring_attention.hpp), at their global positions; attention rings the
// cp group, everything else is row-local.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "ztune/executor/backend.hpp"
#include "ztune/executor/param_store.hpp"
#include "ztune/executor/process_groups.hpp"
#include "ztune/executor/ring_attention.hpp"
#include "ztune/executor/ulysses_attention.hpp"
#include "ztune/kernels/block_sparse_layout.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"

namespace ztune::executor {

/// Tokens of one micro-batch on this data-parallel rank: B·T inputs and targets.
struct MicroBatch {
  std::vector<std::int32_t> tokens;
  std::vector<std::int32_t> targets;
};

class GptStage {
 public:
  /// `loss_scale`: ∂L/∂loss_row, 1/(tokens in the global batch). `chunk`: which
  /// of the stage's model chunks (interleaved 1F1B; 0 otherwise) this object runs.
  GptStage(const Transformer& m, const Plan& plan, ProcessGroups& groups, Backend& backend, ParamStore& store,
           float loss_scale, int chunk = 0);
  ~GptStage();
  GptStage(const GptStage&) = delete;
  GptStage& operator=(const GptStage&) = delete;

  /// Replaces ∂L/∂loss_row (last stage; no-op elsewhere): fp16 training
  /// multiplies it by the dynamic loss scale.
  void set_loss_scale(float loss_scale);

  /// Forward of micro-batch slot `mb`. Not first stage: `input` is the previous
  /// stage's output [rows(), C] in storage(). Returns this stage's output (null on the last).
  ConstTensorRef forward(int mb, const MicroBatch& data, ConstTensorRef input);
  /// Σ over rows of the loss of micro-batch `mb` (last stage, after forward).
  [[nodiscard]] double loss_sum(int mb) const;
  /// Backward of `mb` (`dout` = gradient of the output, ignored on the last stage).
  /// Returns the gradient of the input (nullptr on the first stage), valid until the
  /// next call. Frees the micro-batch's activations.
  ConstTensorRef backward(int mb, const MicroBatch& data, ConstTensorRef dout, bool last_micro);
  /// Rows of the residual stream on this rank (N, or N/tp under sequence parallelism).
  [[nodiscard]] int rows() const { return rows_; }
  [[nodiscard]] int hidden() const { return C_; }
  /// The storage type of activations and their gradients: the parameters' (ParamStore::storage()).
  [[nodiscard]] StorageDtype storage() const { return dt_; }

 private:
  struct LayerActs;
  struct Acts;
  struct BlockParams;
  // One block (gpt_block.cpp): its attention and MLP branches, sequential or parallel.
  // Whether layer l of this chunk keeps only its input and runs forward again in backward.
  [[nodiscard]] bool recomputes_whole(int l) const;
  void forward_block(int l, ConstTensorRef x, LayerActs& la, TensorRef out, bool keep_att);
  void backward_block(int l, ConstTensorRef dres, LayerActs& la, ConstTensorRef x, TensorRef dx);
  /// partial = the branch's row-parallel output before the tensor-parallel reduction.
  void attn_forward(const BlockParams& p, ConstTensorRef x, LayerActs& la, bool keep_att, TensorRef partial);
  void mlp_forward(const BlockParams& p, ConstTensorRef xin, LayerActs& la, TensorRef partial);
  /// dx += the gradient through the branch, given the gathered output gradient
  /// (dout_owner, when it holds it, is freed after its last use).
  void attn_backward(const BlockParams& p, LayerActs& la, ConstTensorRef x, ConstTensorRef dout_full,
                     Buffer& dout_owner, TensorRef dx);
  void mlp_backward(const BlockParams& p, LayerActs& la, ConstTensorRef xin, ConstTensorRef dout_full,
                    Buffer& dout_owner, TensorRef dxin);
  /// Both branches' first step: ln = norm(xin), out = gather(ln)·w + b (width columns).
  void norm_linear_forward(ConstTensorRef xin, Buffer& ln, Buffer& mean, Buffer& rstd, int norm_w, int norm_b, int w,
                           int b, int width, Buffer& out);
  /// Both branches' first step backward: dy (freed) through the column-parallel
  /// GEMM w/b of width columns, whose input ln = norm(xin), into dxin (+=).
  void norm_linear_backward(Buffer& dy, const Buffer& ln, int w, int b, int width, ConstTensorRef xin, int norm_w,
                            int norm_b, const Buffer& mean, const Buffer& rstd, TensorRef dxin);
  void embedding_forward(const MicroBatch& data, TensorRef out);
  void embedding_backward(const MicroBatch& data, ConstTensorRef dres);
  void head_forward(Acts& a, const MicroBatch& data, ConstTensorRef x);
  void head_backward(Acts& a, const MicroBatch& data, ConstTensorRef x, TensorRef dx);
  // LayerNorm or RMSNorm (mean unused then); b < 0: no bias.
  void norm_forward(TensorRef out, Buffer& mean, Buffer& rstd, ConstTensorRef x, int w, int b);
  void norm_backward(TensorRef dx, ConstTensorRef dout, ConstTensorRef x, int w, int b, const Buffer& mean,
                     const Buffer& rstd);
  // RoPE on the Q and K heads of the local qkv rows (in place), or its transpose.
  void rotate(TensorRef qkv, bool backward);
  // The local [N, (NHl + 2·KVl)·hd] projection as the [N, 3·Cl] rows the attention
  // kernels take: itself without grouped-query attention, else K/V heads repeated.
  ConstTensorRef dense_qkv(ConstTensorRef qkv, Buffer& tmp);
  [[nodiscard]] ConstTensorRef param(int id) { return id < 0 ? ConstTensorRef{} : ConstTensorRef(store_.param(id)); }
  [[nodiscard]] TensorRef grad(int id) { return id < 0 ? TensorRef{} : store_.grad(id); }
  // Tensor-parallel f/g: gather rows (identity without SP) and reduce partial sums.
  ConstTensorRef gather_rows(ConstTensorRef shard, Buffer& tmp);
  void reduce_rows(TensorRef partial, TensorRef out);
  // Causal self-attention of one block: dense, or block-sparse when the plan
  // asks for it (DeepSpeed Sparse Attention; att then holds only the layout's blocks).
  [[nodiscard]] std::size_t att_elems() const;
  /// The attention state's storage type: the log-sum-exp of a fused kernel and
  /// the host-side ring and Ulysses states are fp32; probabilities are storage().
  [[nodiscard]] StorageDtype att_dtype() const;
  void attend(TensorRef out, TensorRef att, ConstTensorRef qkv);
  void attend_backward(TensorRef dqkv, ConstTensorRef dout, ConstTensorRef qkv, ConstTensorRef out,
                       ConstTensorRef att);
  // Activations and their gradients in storage(); the statistics kernels keep (norms' mean and rstd) fp32.
  Buffer act(std::size_t n) { return be_.allocate(n, MemCategory::activations, dt_); }
  Buffer work(std::size_t n) { return be_.allocate(n, MemCategory::workspace, dt_); }
  Buffer act32(std::size_t n) { return be_.allocate(n, MemCategory::activations); }
  Buffer work32(std::size_t n) { return be_.allocate(n, MemCategory::workspace); }

  Transformer m_;
  Plan plan_;
  ProcessGroups& g_;
  Backend& be_;
  ParamStore& store_;
  StorageDtype dt_ = StorageDtype::fp32;
  bool first_ = false, last_ = false, sp_ = false;
  bool rms_ = false, swiglu_ = false, rope_ = false, parallel_ = false;
  int tp_ = 1, B_ = 1, T_ = 1, N_ = 1, C_ = 1, Cl_ = 1, NHl_ = 1, Fl_ = 1, Vl_ = 1, vocab_begin_ = 0, rows_ = 1;
  int hd_ = 1, KVl_ = 1, QKVl_ = 1, FCl_ = 1;  // head size; local K/V heads; local QKV and c_fc widths
  int rot_dims_ = 0;                           // channels of each head RoPE turns
  int layers_ = 0, first_layer_ = 0, embed_unit_ = 0, head_unit_ = 0;
  int wte_ = -1, wpe_ = -1, lnf_w_ = -1, lnf_b_ = -1;
  int head_w_ = -1;  // the LM head's weight: wte (tied) or lm_head
  std::vector<BlockParams> blocks_;
  std::optional<kernels::BlockLayout> sparse_;  // the plan's block-sparse layout (one for all heads)
  bool flash_ = false;  // the plan's attention kernel is flash (att holds the log-sum-exp)
  std::unique_ptr<RingAttention> ring_;  // context parallelism (plan cp > 1): T_ = seq_len/cp rows per sequence
  std::unique_ptr<UlyssesAttention> ulysses_;  // DeepSpeed-Ulysses (plan ulysses > 1): T_ = seq_len/u contiguous rows
  /// The model's sliding attention window (0: the whole causal prefix).
  [[nodiscard]] int window() const { return m_.windowed() ? m_.attention_window : 0; }
  std::vector<std::int32_t> positions_;         // position of each of the N rows
  const std::int32_t* local_positions_ = nullptr;  // this rank's rows() of them (sequence parallelism)
  Buffer dloss_;                          // loss_scale for each row
  std::map<int, std::unique_ptr<Acts>> acts_;
  Buffer dinput_;
};

}  // namespace ztune::executor
