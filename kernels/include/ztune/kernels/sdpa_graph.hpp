#pragma once
// cuDNN fused scaled-dot-product attention as a graph of backend-API operations
// (issue 24 item 3): the device-free half. Which path a call takes (cuDNN or the
// project's own flash kernels, kernels/cuda/attention.hpp) and why, the tensors'
// dimensions and strides over the packed qkv [B, T, 3C] layout the executor
// uses, and the operation nodes of the causal forward and backward graphs, as
// plain data. kernels/cuda/src/cudnn_sdpa.cpp turns a Graph into cuDNN backend
// descriptors one to one (cudnn_graph.h: tensor, matmul, pointwise, reduction
// operations; an operation graph; heuristics mode A; an execution plan) and
// caches the plan by cache_key(); everything here is unit-tested on the CPU.
//
// The composition is the softmax of FlashAttention written as primitive nodes,
// as cudnn_frontend's sdpa node lowers it: S = Q·Kᵀ, S·scale, causal mask
// (GEN_INDEX row ≥ col, BINARY_SELECT with −inf), rowmax M, exp(S − M), rowsum Z,
// Stats = M + log Z (the log-sum-exp the flash kernels keep, [B, NH, T]),
// P = exp(S − M) / Z, O = P·V. Backward (FA-2): P recomputed from Stats,
// dV = Pᵀ·dO, dP = dO·Vᵀ, D = rowsum(dO∘O), dS = P∘(dP − D)·scale, dQ = dS·K,
// dK = dSᵀ·Q, the transposed products formed from transposed recomputation
// (virtual tensors cannot be transposed by strides). Never run on a GPU yet.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ztune::kernels::sdpa {

enum class Dtype : std::uint8_t { fp32, bf16, fp16, int32 };  // int32: GEN_INDEX outputs
const char* dtype_name(Dtype d);

struct Problem {
  int b = 1, t = 1, nh = 1, hd = 64;  // batch, sequence, heads, head size (C = nh·hd)
  Dtype dtype = Dtype::bf16;          // storage of qkv, out, dout, dqkv
  int window = 0;                     // > 0: sliding window (not expressed here)
};

enum class Path : std::uint8_t { cudnn, fallback };
struct Choice {
  Path path = Path::fallback;
  std::string reason;  // why the fallback (empty for cudnn)
};

/// The path before any graph is built: fp32 storage, a sliding window, a head
/// size outside {multiples of 8 up to 128}, no cuDNN ≥ 9.0 at run time
/// (cudnn_version = cudnnGetVersion(), 0 = not loaded) or a device below sm_80
/// choose the flash kernels. cuDNN may still refuse the graph; the caller then
/// falls back with that reason (CudnnSdpa).
Choice choose(const Problem& p, long cudnn_version, int sm);

enum class Op : std::uint8_t {
  matmul,      // y = x · b (batched over dims 0, 1)
  mul,         // y = x ∘ b (broadcast)
  sub,         // y = x − b
  add,         // y = x + b
  div,         // y = x / b
  exp,         // y = exp(x)
  log,         // y = log(x)
  gen_index,   // y = index of x along `axis`
  cmp_ge,      // y = x ≥ b (boolean)
  select,      // y = t ? x : b (BINARY_SELECT)
  reduce_max,  // y = max over the dims where y has extent 1
  reduce_sum,  // y = Σ over the dims where y has extent 1
};
const char* op_name(Op o);

/// The buffer a non-virtual tensor views; the pointer bound is base + offset elements.
enum class Bind : std::uint8_t { none, qkv, out, stats, dout, dqkv, delta };
const char* bind_name(Bind b);

struct Tensor {
  std::int64_t uid = 0;
  std::string name;
  std::array<std::int64_t, 4> dims{};
  std::array<std::int64_t, 4> strides{};
  Dtype dtype = Dtype::fp32;
  bool is_virtual = false;  // lives inside the fused kernel only
  bool by_value = false;    // a host scalar (the scale, −inf)
  bool boolean = false;     // the mask (CUDNN_DATA_BOOLEAN)
  Bind bind = Bind::none;   // which buffer (non-virtual, not by-value)
  std::int64_t offset = 0;  // elements from the buffer's start (K at C, V at 2C)
  float value = 0;          // by-value scalars
};

struct Node {
  Op op = Op::mul;
  std::int64_t x = 0, b = 0, t = 0;  // input uids (b, t: 0 = unused)
  std::int64_t y = 0;                // output uid
  std::int64_t axis = 0;             // gen_index
};

struct Graph {
  std::vector<Tensor> tensors;
  std::vector<Node> nodes;
  [[nodiscard]] const Tensor* find(std::int64_t uid) const;
  /// The non-virtual, non-by-value tensors (bound to device pointers), in uid order.
  [[nodiscard]] std::vector<const Tensor*> bound() const;
};

/// Q, K, V over qkv [B, T, 3C] (Q at column 0, K at C, V at 2C: the pointers a call
/// binds are qkv, qkv + C, qkv + 2C), O over out [B, T, C], Stats [B, NH, T, 1].
Graph forward_graph(const Problem& p);
/// D = rowsum(dO∘O) into delta [B, NH, T, 1] (fp32): its own small graph, so the
/// main backward graph can read it transposed.
Graph backward_delta_graph(const Problem& p);
/// dQ, dK, dV over a [B, T, 3C] gradient buffer (written, not accumulated: the
/// caller adds it into dqkv, the Backend's backward += convention).
Graph backward_graph(const Problem& p);
/// Checks every node's shapes (matmul [.., m, k]·[.., k, n] → [.., m, n]; pointwise
/// equal or broadcast; reductions to extent 1) and that inputs exist before use;
/// returns the first problem, or "" when consistent.
std::string validate(const Graph& g);

/// The plan cache's key: shapes, dtype and which graph.
std::string cache_key(const Problem& p, const char* which);

/// One tensor of the executor's packed buffers as both graph paths take it
/// (cudnn_frontend's sdpa nodes, kernels/cuda/src/cudnn_sdpa_frontend.cpp, and
/// the hand-lowered graphs here, which also swap its last two dimensions for
/// Kᵀ): dims [B, NH, T, HD] ([B, NH, T, 1] for Stats), strides over the buffer,
/// and the element offset of its first element from the buffer's start.
struct View {
  std::array<std::int64_t, 4> dims{};
  std::array<std::int64_t, 4> strides{};
  std::int64_t offset = 0;
};
/// Q, K, V over qkv [B, T, 3C] (dQ, dK, dV the same over the gradient buffer),
/// O and dO over [B, T, C], Stats over [B, NH, T] in fp32.
struct PackedViews {
  View q, k, v, o, stats;
};
PackedViews packed_views(const Problem& p);

}  // namespace ztune::kernels::sdpa
