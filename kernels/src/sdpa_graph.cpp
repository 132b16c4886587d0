#include "ztune/kernels/sdpa_graph.hpp"

#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <utility>

namespace ztune::kernels::sdpa {

const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::fp32: return "fp32";
    case Dtype::bf16: return "bf16";
    case Dtype::fp16: return "fp16";
    case Dtype::int32: return "int32";
  }
  return "?";
}

const char* bind_name(Bind b) {
  switch (b) {
    case Bind::none: return "none";
    case Bind::qkv: return "qkv";
    case Bind::out: return "out";
    case Bind::stats: return "stats";
    case Bind::dout: return "dout";
    case Bind::dqkv: return "dqkv";
    case Bind::delta: return "delta";
  }
  return "?";
}

const char* op_name(Op o) {
  switch (o) {
    case Op::matmul: return "matmul";
    case Op::mul: return "mul";
    case Op::sub: return "sub";
    case Op::add: return "add";
    case Op::div: return "div";
    case Op::exp: return "exp";
    case Op::log: return "log";
    case Op::gen_index: return "gen_index";
    case Op::cmp_ge: return "cmp_ge";
    case Op::select: return "select";
    case Op::reduce_max: return "reduce_max";
    case Op::reduce_sum: return "reduce_sum";
  }
  return "?";
}

Choice choose(const Problem& p, long cudnn_version, int sm) {
  if (p.dtype == Dtype::fp32 || p.dtype == Dtype::int32)
    return {Path::fallback, std::string("storage is ") + dtype_name(p.dtype) + " (cuDNN's fused attention takes bf16/fp16)"};
  if (p.window > 0) return {Path::fallback, "sliding-window attention (the graph here is causal only)"};
  if (p.hd % 8 != 0 || p.hd > 128 || p.hd < 8)
    return {Path::fallback, "head size " + std::to_string(p.hd) + " (cuDNN's fused attention: multiples of 8 up to 128)"};
  if (cudnn_version < 90000)
    return {Path::fallback, cudnn_version == 0 ? std::string("cuDNN not loaded")
                                               : "cuDNN " + std::to_string(cudnn_version) + " (need 9.0 or newer)"};
  if (sm < 80) return {Path::fallback, "sm_" + std::to_string(sm) + " (cuDNN's fused attention needs sm_80 or newer)"};
  return {Path::cudnn, ""};
}

const Tensor* Graph::find(std::int64_t uid) const {
  for (const auto& t : tensors)
    if (t.uid == uid) return &t;
  return nullptr;
}

std::vector<const Tensor*> Graph::bound() const {
  std::vector<const Tensor*> out;
  for (const auto& t : tensors)
    if (!t.is_virtual && !t.by_value) out.push_back(&t);
  return out;
}

namespace {

using D4 = std::array<std::int64_t, 4>;

class Builder {
 public:
  explicit Builder(const Problem& p)
      : p_(p), io_(p.dtype), T_(p.t), H_(p.nh), HD_(p.hd), C_(static_cast<std::int64_t>(p.nh) * p.hd) {}

  std::int64_t bound(const std::string& name, Bind bind, std::int64_t offset, D4 dims, D4 strides, Dtype dt) {
    Tensor t;
    t.uid = next_++;
    t.name = name;
    t.dims = dims;
    t.strides = strides;
    t.dtype = dt;
    t.bind = bind;
    t.offset = offset;
    g_.tensors.push_back(t);
    return t.uid;
  }
  std::int64_t scalar(const std::string& name, float value) {
    Tensor t;
    t.uid = next_++;
    t.name = name;
    t.dims = {1, 1, 1, 1};
    t.strides = {1, 1, 1, 1};
    t.by_value = true;
    t.value = value;
    g_.tensors.push_back(t);
    return t.uid;
  }
  std::int64_t virt(const std::string& name, D4 dims, Dtype dt, bool boolean = false) {
    Tensor t;
    t.uid = next_++;
    t.name = name;
    t.dims = dims;
    t.strides = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
    t.dtype = dt;
    t.is_virtual = true;
    t.boolean = boolean;
    g_.tensors.push_back(t);
    return t.uid;
  }
  void node(Op op, std::int64_t x, std::int64_t b, std::int64_t y, std::int64_t t = 0, std::int64_t axis = 0) {
    g_.nodes.push_back(Node{op, x, b, t, y, axis});
  }
  // Views of the packed buffers: qkv [B, T, 3C], out/dout [B, T, C], stats/delta [B, NH, T].
  // packed_views' view, or with its last two dimensions swapped (Kᵀ, Oᵀ).
  std::int64_t view(const std::string& name, Bind bind, const View& v, bool transposed) {
    D4 dims = v.dims, strides = v.strides;
    if (transposed) {
      std::swap(dims[2], dims[3]);
      std::swap(strides[2], strides[3]);
    }
    return bound(name, bind, v.offset, dims, strides, io_);
  }
  std::int64_t qkv_view(const std::string& name, int part, bool transposed, Bind bind = Bind::qkv) {
    const PackedViews pv = packed_views(p_);
    return view(name, bind, part == 0 ? pv.q : part == 1 ? pv.k : pv.v, transposed);
  }
  std::int64_t bt_c_view(const std::string& name, Bind bind, bool transposed) {
    return view(name, bind, packed_views(p_).o, transposed);
  }
  std::int64_t row_stat(const std::string& name, Bind bind, bool transposed) {
    if (transposed) return bound(name, bind, 0, {B(), H_, 1, T_}, {H_ * T_, T_, T_, 1}, Dtype::fp32);
    return bound(name, bind, 0, {B(), H_, T_, 1}, {H_ * T_, T_, 1, 1}, Dtype::fp32);
  }
  /// scale · (a·b) with the causal mask: keep where index(axis keep_ge) ≥ index(other axis).
  std::int64_t masked_scores(const std::string& tag, std::int64_t a, std::int64_t b, std::int64_t scale,
                             std::int64_t neg_inf, bool rows_are_queries) {
    const D4 tt{B(), H_, T_, T_};
    const std::int64_t s = virt(tag + "scores", tt, Dtype::fp32);
    node(Op::matmul, a, b, s);
    const std::int64_t s2 = virt(tag + "scaled", tt, Dtype::fp32);
    node(Op::mul, s, scale, s2);
    const std::int64_t row = virt(tag + "row_index", tt, Dtype::int32);
    node(Op::gen_index, s2, 0, row, 0, 2);
    const std::int64_t col = virt(tag + "col_index", tt, Dtype::int32);
    node(Op::gen_index, s2, 0, col, 0, 3);
    const std::int64_t mask = virt(tag + "causal", tt, Dtype::fp32, true);
    // Query i sees keys j ≤ i: rows are queries → row ≥ col; transposed → col ≥ row.
    if (rows_are_queries) node(Op::cmp_ge, row, col, mask);
    else node(Op::cmp_ge, col, row, mask);
    const std::int64_t s3 = virt(tag + "masked", tt, Dtype::fp32);
    node(Op::select, s2, neg_inf, s3, mask);
    return s3;
  }
  [[nodiscard]] std::int64_t B() const { return p_.b; }
  [[nodiscard]] Dtype io() const { return io_; }
  [[nodiscard]] std::int64_t T() const { return T_; }
  [[nodiscard]] std::int64_t H() const { return H_; }
  [[nodiscard]] std::int64_t HD() const { return HD_; }
  [[nodiscard]] float scale() const { return 1.0f / std::sqrt(static_cast<float>(p_.hd)); }
  Graph take() { return std::move(g_); }

 private:
  Problem p_;
  Dtype io_;
  std::int64_t T_, H_, HD_, C_;
  std::int64_t next_ = 1;
  Graph g_;
};

void check_problem(const Problem& p) {
  if (p.b < 1 || p.t < 1 || p.nh < 1 || p.hd < 1)
    throw std::invalid_argument("sdpa graph: b, t, nh, hd must be >= 1 (got " + std::to_string(p.b) + ", " +
                                std::to_string(p.t) + ", " + std::to_string(p.nh) + ", " + std::to_string(p.hd) +
                                ")");
}

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

Graph forward_graph(const Problem& p) {
  check_problem(p);
  Builder g(p);
  const std::int64_t q = g.qkv_view("Q", 0, false), kt = g.qkv_view("K^T", 1, true), v = g.qkv_view("V", 2, false);
  const std::int64_t scale = g.scalar("scale", g.scale()), neg_inf = g.scalar("-inf", kNegInf);
  const std::int64_t s = g.masked_scores("", q, kt, scale, neg_inf, true);
  const std::array<std::int64_t, 4> tt{g.B(), g.H(), g.T(), g.T()}, t1{g.B(), g.H(), g.T(), 1};
  const std::int64_t m = g.virt("rowmax", t1, Dtype::fp32);
  g.node(Op::reduce_max, s, 0, m);
  const std::int64_t centred = g.virt("centred", tt, Dtype::fp32);
  g.node(Op::sub, s, m, centred);
  const std::int64_t e = g.virt("exp", tt, Dtype::fp32);
  g.node(Op::exp, centred, 0, e);
  const std::int64_t z = g.virt("rowsum", t1, Dtype::fp32);
  g.node(Op::reduce_sum, e, 0, z);
  const std::int64_t logz = g.virt("log_rowsum", t1, Dtype::fp32);
  g.node(Op::log, z, 0, logz);
  const std::int64_t stats = g.row_stat("Stats", Bind::stats, false);
  g.node(Op::add, m, logz, stats);
  const std::int64_t prob = g.virt("P", tt, g.io());
  g.node(Op::div, e, z, prob);
  const std::int64_t o = g.bt_c_view("O", Bind::out, false);
  g.node(Op::matmul, prob, v, o);
  return g.take();
}

Graph backward_delta_graph(const Problem& p) {
  check_problem(p);
  Builder g(p);
  const std::int64_t d_o = g.bt_c_view("dO", Bind::dout, false), o = g.bt_c_view("O", Bind::out, false);
  const std::int64_t prod = g.virt("dO*O", {g.B(), g.H(), g.T(), g.HD()}, Dtype::fp32);
  g.node(Op::mul, d_o, o, prod);
  const std::int64_t delta = g.row_stat("D", Bind::delta, false);
  g.node(Op::reduce_sum, prod, 0, delta);
  return g.take();
}

Graph backward_graph(const Problem& p) {
  check_problem(p);
  Builder g(p);
  const std::array<std::int64_t, 4> tt{g.B(), g.H(), g.T(), g.T()};
  const std::int64_t q = g.qkv_view("Q", 0, false), kt = g.qkv_view("K^T", 1, true);
  const std::int64_t k = g.qkv_view("K", 1, false), qt = g.qkv_view("Q^T", 0, true);
  const std::int64_t v = g.qkv_view("V", 2, false), vt = g.qkv_view("V^T", 2, true);
  const std::int64_t d_o = g.bt_c_view("dO", Bind::dout, false), d_ot = g.bt_c_view("dO^T", Bind::dout, true);
  const std::int64_t stats = g.row_stat("Stats", Bind::stats, false), stats_t = g.row_stat("Stats^T", Bind::stats, true);
  const std::int64_t delta = g.row_stat("D", Bind::delta, false), delta_t = g.row_stat("D^T", Bind::delta, true);
  const std::int64_t scale = g.scalar("scale", g.scale()), neg_inf = g.scalar("-inf", kNegInf);
  // P [query, key] and Pᵀ [key, query], each recomputed from the saved log-sum-exp.
  const std::int64_t s = g.masked_scores("", q, kt, scale, neg_inf, true);
  const std::int64_t centred = g.virt("centred", tt, Dtype::fp32);
  g.node(Op::sub, s, stats, centred);
  const std::int64_t prob = g.virt("P", tt, Dtype::fp32);
  g.node(Op::exp, centred, 0, prob);
  const std::int64_t st = g.masked_scores("T:", k, qt, scale, neg_inf, false);
  const std::int64_t centred_t = g.virt("T:centred", tt, Dtype::fp32);
  g.node(Op::sub, st, stats_t, centred_t);
  const std::int64_t prob_t = g.virt("P^T", tt, g.io());
  g.node(Op::exp, centred_t, 0, prob_t);
  // dV = Pᵀ·dO
  const std::int64_t dv = g.qkv_view("dV", 2, false, Bind::dqkv);
  g.node(Op::matmul, prob_t, d_o, dv);
  // dS = P∘(dO·Vᵀ − D)·scale; dQ = dS·K
  const std::int64_t dp = g.virt("dP", tt, Dtype::fp32);
  g.node(Op::matmul, d_o, vt, dp);
  const std::int64_t dp_c = g.virt("dP-D", tt, Dtype::fp32);
  g.node(Op::sub, dp, delta, dp_c);
  const std::int64_t ds = g.virt("dS", tt, Dtype::fp32);
  g.node(Op::mul, prob, dp_c, ds);
  const std::int64_t ds_s = g.virt("dS*scale", tt, g.io());
  g.node(Op::mul, ds, scale, ds_s);
  const std::int64_t dq = g.qkv_view("dQ", 0, false, Bind::dqkv);
  g.node(Op::matmul, ds_s, k, dq);
  // dSᵀ = Pᵀ∘(V·dOᵀ − Dᵀ)·scale; dK = dSᵀ·Q
  const std::int64_t dpt = g.virt("dP^T", tt, Dtype::fp32);
  g.node(Op::matmul, v, d_ot, dpt);
  const std::int64_t dpt_c = g.virt("dP^T-D^T", tt, Dtype::fp32);
  g.node(Op::sub, dpt, delta_t, dpt_c);
  const std::int64_t dst = g.virt("dS^T", tt, Dtype::fp32);
  g.node(Op::mul, prob_t, dpt_c, dst);
  const std::int64_t dst_s = g.virt("dS^T*scale", tt, g.io());
  g.node(Op::mul, dst, scale, dst_s);
  const std::int64_t dk = g.qkv_view("dK", 1, false, Bind::dqkv);
  g.node(Op::matmul, dst_s, q, dk);
  return g.take();
}

std::string validate(const Graph& g) {
  std::set<std::int64_t> ready, uids;
  for (const auto& t : g.tensors) {
    if (!uids.insert(t.uid).second) return "uid " + std::to_string(t.uid) + " appears twice";
    if (!t.is_virtual) ready.insert(t.uid);  // bound and by-value tensors are inputs or outputs
  }
  std::set<std::int64_t> produced;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const std::string where = "node " + std::to_string(i) + " (" + op_name(n.op) + ")";
    const Tensor* y = g.find(n.y);
    const Tensor* x = g.find(n.x);
    if (x == nullptr || y == nullptr) return where + ": unknown tensor";
    auto usable = [&](std::int64_t u) { return ready.count(u) != 0; };
    if (!usable(n.x)) return where + ": input " + x->name + " used before it is produced";
    const Tensor* b = n.b != 0 ? g.find(n.b) : nullptr;
    if (n.b != 0 && (b == nullptr || !usable(n.b))) return where + ": second input missing or not yet produced";
    const Tensor* t = n.t != 0 ? g.find(n.t) : nullptr;
    if (n.t != 0 && (t == nullptr || !usable(n.t) || !t->boolean)) return where + ": mask missing or not boolean";
    if (!produced.insert(n.y).second) return where + ": " + y->name + " produced twice";
    if (y->by_value) return where + ": writes a by-value scalar";
    if (!y->is_virtual && y->bind == Bind::none) return where + ": output " + y->name + " bound to no buffer";
    switch (n.op) {
      case Op::matmul: {
        if (b == nullptr) return where + ": matmul needs two inputs";
        for (int d = 0; d < 2; ++d)
          if (x->dims[d] != y->dims[d] || b->dims[d] != y->dims[d]) return where + ": batch dims differ";
        if (x->dims[3] != b->dims[2]) return where + ": inner dims " + std::to_string(x->dims[3]) + " vs " +
                                             std::to_string(b->dims[2]);
        if (y->dims[2] != x->dims[2] || y->dims[3] != b->dims[3]) return where + ": output dims";
        break;
      }
      case Op::reduce_max:
      case Op::reduce_sum:
        for (int d = 0; d < 4; ++d)
          if (y->dims[d] != 1 && y->dims[d] != x->dims[d]) return where + ": reduction output dims";
        break;
      case Op::gen_index:
        if (n.axis < 0 || n.axis > 3) return where + ": axis";
        if (x->dims != y->dims) return where + ": gen_index dims";
        break;
      default:
        for (const Tensor* in : {x, b, t}) {
          if (in == nullptr) continue;
          for (int d = 0; d < 4; ++d)
            if (in->dims[d] != y->dims[d] && in->dims[d] != 1) return where + ": " + in->name + " does not broadcast";
        }
        if ((n.op == Op::cmp_ge) != y->boolean) return where + ": only a comparison yields a boolean";
    }
    ready.insert(n.y);
  }
  for (const auto& t : g.tensors)
    if (t.is_virtual && produced.count(t.uid) == 0) return "virtual tensor " + t.name + " is never produced";
  return "";
}

std::string cache_key(const Problem& p, const char* which) {
  return std::string(which) + ":" + dtype_name(p.dtype) + ":b" + std::to_string(p.b) + ":t" + std::to_string(p.t) +
         ":nh" + std::to_string(p.nh) + ":hd" + std::to_string(p.hd);
}

PackedViews packed_views(const Problem& p) {
  const std::int64_t b = p.b, t = p.t, nh = p.nh, hd = p.hd, c = nh * hd;
  const std::array<std::int64_t, 4> dims{b, nh, t, hd}, packed{t * 3 * c, hd, 3 * c, 1};
  return {{dims, packed, 0},
          {dims, packed, c},
          {dims, packed, 2 * c},
          {dims, {t * c, hd, c, 1}, 0},
          {{b, nh, t, 1}, {nh * t, t, 1, 1}, 0}};
}

}  // namespace ztune::kernels::sdpa
