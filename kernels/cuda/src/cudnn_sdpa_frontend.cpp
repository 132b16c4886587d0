// cuDNN fused attention through cudnn_frontend (see cudnn_sdpa_frontend.hpp).
// Compiled only with ZTUNE_HAVE_CUDNN_FRONTEND (the CMake list adds it then).
#include "cudnn_sdpa_frontend.hpp"

#include <cmath>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include <cudnn_frontend.h>

namespace ztune::kernels::cuda::fe_sdpa {

namespace {

namespace fe = cudnn_frontend;

// The variant pack's unique ids.
enum : std::int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

fe::DataType_t io_type(sdpa::Dtype d) {
  switch (d) {
    case sdpa::Dtype::bf16: return fe::DataType_t::BFLOAT16;
    case sdpa::Dtype::fp16: return fe::DataType_t::HALF;
    default: break;
  }
  throw std::logic_error(std::string("cudnn_sdpa_frontend: storage ") + sdpa::dtype_name(d) +
                         " (sdpa::choose sends it to the flash kernels)");
}

std::size_t io_bytes(sdpa::Dtype d) { return d == sdpa::Dtype::fp32 ? 4 : 2; }

std::vector<std::int64_t> vec(const std::array<std::int64_t, 4>& a) { return {a.begin(), a.end()}; }

std::shared_ptr<fe::graph::Tensor_attributes> input(fe::graph::Graph& g, const char* name, std::int64_t uid,
                                                   const sdpa::View& v) {
  return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(vec(v.dims)).set_stride(vec(v.strides)));
}

// The causal mask as the frontend spells it: keep key ≤ query, counted from the
// top left (equal query and key lengths).
template <typename Attributes>
Attributes causal(Attributes a, float scale) {
  return a.set_attn_scale(scale).set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
}

Built build_graph(cudnnHandle_t handle, const sdpa::Problem& p, bool backward) {
  Built out;
  const sdpa::PackedViews s = sdpa::packed_views(p);
  const float scale = 1.0f / std::sqrt(static_cast<float>(p.hd));
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(io_type(p.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto q = input(*g, "Q", kQ, s.q);
  auto k = input(*g, "K", kK, s.k);
  auto v = input(*g, "V", kV, s.v);
  if (!backward) {
    auto [o, stats] = g->sdpa(q, k, v, causal(fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true), scale));
    o->set_output(true).set_dim(vec(s.o.dims)).set_stride(vec(s.o.strides)).set_uid(kO);
    stats->set_output(true).set_data_type(fe::DataType_t::FLOAT).set_dim(vec(s.stats.dims)).set_stride(vec(s.stats.strides)).set_uid(kStats);
  } else {
    auto o = input(*g, "O", kO, s.o);
    auto dout = input(*g, "dO", kDO, s.o);
    auto stats = g->tensor(fe::graph::Tensor_attributes()
                               .set_name("Stats")
                               .set_uid(kStats)
                               .set_dim(vec(s.stats.dims))
                               .set_stride(vec(s.stats.strides))
                               .set_data_type(fe::DataType_t::FLOAT));
    auto [dq, dk, dv] =
        g->sdpa_backward(q, k, v, o, dout, stats, causal(fe::graph::SDPA_backward_attributes().set_name("sdpa_backward"), scale));
    // dQ, dK, dV: the same views over the gradient buffer.
    dq->set_output(true).set_dim(vec(s.q.dims)).set_stride(vec(s.q.strides)).set_uid(kDQ);
    dk->set_output(true).set_dim(vec(s.k.dims)).set_stride(vec(s.k.strides)).set_uid(kDK);
    dv->set_output(true).set_dim(vec(s.v.dims)).set_stride(vec(s.v.strides)).set_uid(kDV);
  }
  // Each step says why it stopped; the first refusal is the reason kept.
  auto refused = [&](fe::error_t e, const char* step) {
    out.refused = std::string(step) + ": " + e.get_message();
    return out;
  };
  if (auto e = g->validate(); e.is_bad()) return refused(e, "validate");
  if (auto e = g->build_operation_graph(handle); e.is_bad()) return refused(e, "build_operation_graph");
  if (auto e = g->create_execution_plans({fe::HeurMode_t::A}); e.is_bad()) return refused(e, "create_execution_plans");
  if (auto e = g->check_support(handle); e.is_bad()) return refused(e, "check_support");
  // The heuristics' first supported plan only: finalizing every candidate can
  // compile each at run time (seconds apiece).
  if (auto e = g->build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE); e.is_bad()) return refused(e, "build_plans");
  if (auto e = g->get_workspace_size(out.workspace); e.is_bad()) return refused(e, "get_workspace_size");
  out.graph = g;
  return out;
}

}  // namespace

Built build(cudnnHandle_t handle, const sdpa::Problem& p, bool backward) {
  // The frontend reports through error_t, but parts of it (and of cuDNN's
  // loader) throw: a graph it cannot build is a refusal either way, and the
  // call takes the flash kernels with the reason.
  try {
    return build_graph(handle, p, backward);
  } catch (const std::exception& e) {
    Built out;
    out.refused = std::string("cudnn_frontend threw: ") + e.what();
    return out;
  }
}

void execute(const Built& b, cudnnHandle_t handle, const sdpa::Problem& p, bool backward, const Buffers& buf,
             void* workspace) {
  const sdpa::PackedViews s = sdpa::packed_views(p);
  const std::size_t eb = io_bytes(p.dtype);
  auto at = [&](const void* base, const sdpa::View& v) {
    return static_cast<unsigned char*>(const_cast<void*>(base)) + static_cast<std::size_t>(v.offset) * eb;
  };
  std::unordered_map<std::int64_t, void*> pack{{kQ, at(buf.qkv, s.q)}, {kK, at(buf.qkv, s.k)}, {kV, at(buf.qkv, s.v)},
                                               {kO, buf.out}, {kStats, buf.stats}};
  if (backward) {
    pack[kDO] = const_cast<void*>(buf.dout);
    pack[kDQ] = at(buf.dqkv, s.q);
    pack[kDK] = at(buf.dqkv, s.k);
    pack[kDV] = at(buf.dqkv, s.v);
  }
  const auto& g = *static_cast<const fe::graph::Graph*>(b.graph.get());
  if (auto e = g.execute(handle, pack, workspace); e.is_bad())
    throw std::runtime_error(std::string("cudnn_attention: cudnn_frontend ") + (backward ? "sdpa_backward" : "sdpa") +
                             " execute: " + e.get_message());
}

}  // namespace ztune::kernels::cuda::fe_sdpa
