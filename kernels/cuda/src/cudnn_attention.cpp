// cuDNN fused attention through the backend graph API (see cudnn_attention.hpp).
// Each sdpa::Tensor becomes a CUDNN_BACKEND_TENSOR_DESCRIPTOR, each sdpa::Node one
// operation descriptor (matmul, pointwise, reduction) with its operator
// descriptor; the operation graph goes to heuristics mode A and the first engine
// configuration whose execution plan finalizes is kept, with every descriptor
// it references, in a cache keyed by sdpa::cache_key. Compiled, never run.
#include "ztune/kernels/cuda/cudnn_attention.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ztune/kernels/cuda/attention.hpp"
#include "ztune/kernels/cuda/check.hpp"
#include "ztune/kernels/cuda/elementwise.hpp"

#if ZTUNE_HAVE_CUDNN
#include <cudnn_graph.h>
#endif
#if ZTUNE_HAVE_CUDNN_FRONTEND
#include "cudnn_sdpa_frontend.hpp"
#endif

namespace ztune::kernels::cuda {

namespace {

template <typename T>
constexpr sdpa::Dtype dtype_of() {
  if constexpr (std::is_same_v<T, float>) return sdpa::Dtype::fp32;
  else if constexpr (std::is_same_v<T, __half>) return sdpa::Dtype::fp16;
  else return sdpa::Dtype::bf16;
}

/// Device memory grown on demand. A block it outgrows is kept until the end, not
/// freed: enqueued work, and a CUDA graph captured earlier, may still point into
/// it (freeing it under a captured graph would let a replay write freed memory).
/// Growing inside a capture is refused with the reason (cudaMalloc would end
/// the capture): the step before the captured one runs the same shapes eagerly.
class Grow {
 public:
  ~Grow() {
    for (void* p : retired_) cudaFree(p);
    if (p_ != nullptr) cudaFree(p_);
  }
  void* get(std::size_t bytes, cudaStream_t stream) {
    if (bytes <= cap_ && p_ != nullptr) return p_;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    ZT_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
    if (capture != cudaStreamCaptureStatusNone)
      throw CudaError("cuDNN attention: a buffer must grow to " + std::to_string(bytes) +
                      " bytes while a CUDA graph is being captured; run the step once eagerly first");
    if (p_ != nullptr) retired_.push_back(p_);
    p_ = nullptr;
    cap_ = 0;
    ZT_CUDA_CHECK(cudaMalloc(&p_, bytes == 0 ? 1 : bytes));
    cap_ = bytes;
    return p_;
  }

 private:
  void* p_ = nullptr;
  std::size_t cap_ = 0;
  std::vector<void*> retired_;
};

}  // namespace

#if ZTUNE_HAVE_CUDNN
namespace {

std::size_t elem_bytes(sdpa::Dtype d) { return d == sdpa::Dtype::bf16 || d == sdpa::Dtype::fp16 ? 2 : 4; }

struct Refused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string status_text(cudnnStatus_t s) {
  std::string text = cudnnGetErrorString(s);
  char last[512] = {0};
  cudnnGetLastErrorString(last, sizeof(last));
  if (last[0] != '\0') text += std::string(" (") + last + ")";
  return text;
}

void check(cudnnStatus_t s, const std::string& what) {
  if (s != CUDNN_STATUS_SUCCESS) throw Refused(what + ": " + status_text(s));
}

/// An owned backend descriptor.
class Desc {
 public:
  Desc() = default;
  explicit Desc(cudnnBackendDescriptorType_t type, const char* what) {
    check(cudnnBackendCreateDescriptor(type, &d_), std::string("create ") + what);
  }
  ~Desc() {
    if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(Desc&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  Desc& operator=(Desc&& o) noexcept {
    std::swap(d_, o.d_);
    return *this;
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  [[nodiscard]] cudnnBackendDescriptor_t get() const { return d_; }
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::int64_t count, const void* v,
           const std::string& what) {
    check(cudnnBackendSetAttribute(d_, name, type, count, v), "set " + what);
  }
  void set_desc(cudnnBackendAttributeName_t name, const Desc& other, const std::string& what) {
    cudnnBackendDescriptor_t o = other.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o, what);
  }
  void finalize(const std::string& what) { check(cudnnBackendFinalize(d_), "finalize " + what); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

cudnnDataType_t data_type(const sdpa::Tensor& t) {
  if (t.boolean) return CUDNN_DATA_BOOLEAN;
  switch (t.dtype) {
    case sdpa::Dtype::fp32: return CUDNN_DATA_FLOAT;
    case sdpa::Dtype::bf16: return CUDNN_DATA_BFLOAT16;
    case sdpa::Dtype::fp16: return CUDNN_DATA_HALF;
    case sdpa::Dtype::int32: return CUDNN_DATA_INT32;
  }
  return CUDNN_DATA_FLOAT;
}

cudnnPointwiseMode_t pointwise_mode(sdpa::Op op) {
  switch (op) {
    case sdpa::Op::mul: return CUDNN_POINTWISE_MUL;
    case sdpa::Op::sub: return CUDNN_POINTWISE_SUB;
    case sdpa::Op::add: return CUDNN_POINTWISE_ADD;
    case sdpa::Op::div: return CUDNN_POINTWISE_DIV;
    case sdpa::Op::exp: return CUDNN_POINTWISE_EXP;
    case sdpa::Op::log: return CUDNN_POINTWISE_LOG;
    case sdpa::Op::gen_index: return CUDNN_POINTWISE_GEN_INDEX;
    case sdpa::Op::cmp_ge: return CUDNN_POINTWISE_CMP_GE;
    case sdpa::Op::select: return CUDNN_POINTWISE_BINARY_SELECT;
    default: break;
  }
  throw std::logic_error(std::string("cudnn_attention: ") + sdpa::op_name(op) + " is not a pointwise operation");
}

}  // namespace

struct CudnnAttention::Impl {
  struct Plan {
    bool ok = false;
    std::string reason;
    std::vector<Desc> keep;  // every descriptor the plan references
    Desc plan;
    std::int64_t workspace = 0;
    sdpa::Graph graph;
  };
  cudnnHandle_t handle = nullptr;
  std::string handle_error;
  int sm = -1;
  std::map<std::string, std::unique_ptr<Plan>> plans;
  Grow workspace, dqkv, delta;
#if ZTUNE_HAVE_CUDNN_FRONTEND
  std::map<std::string, fe_sdpa::Built> frontend_plans;  // built or refused, by cache key

  /// The frontend's graph for `p`, built on first use; a refusal is kept too.
  const fe_sdpa::Built& frontend(const sdpa::Problem& p, bool backward) {
    const std::string key = sdpa::cache_key(p, backward ? "fe_bwd" : "fe_fwd");
    auto it = frontend_plans.find(key);
    if (it == frontend_plans.end()) it = frontend_plans.emplace(key, fe_sdpa::build(handle, p, backward)).first;
    return it->second;
  }
  /// Enqueues a built frontend graph with its workspace on `stream`.
  void execute(const fe_sdpa::Built& built, const sdpa::Problem& p, bool backward, const fe_sdpa::Buffers& buffers,
               cudaStream_t stream) {
    void* ws = workspace.get(static_cast<std::size_t>(built.workspace), stream);
    check(cudnnSetStream(handle, stream), "cudnnSetStream");
    fe_sdpa::execute(built, handle, p, backward, buffers, ws);
  }
#endif

  ~Impl() {
    if (handle != nullptr) cudnnDestroy(handle);
  }

  int device_sm() {
    if (sm < 0) {
      int dev = 0, major = 0, minor = 0;
      ZT_CUDA_CHECK(cudaGetDevice(&dev));
      ZT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
      ZT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
      sm = 10 * major + minor;
    }
    return sm;
  }

  bool ensure_handle() {
    if (handle != nullptr) return true;
    if (!handle_error.empty()) return false;
    const cudnnStatus_t s = cudnnCreate(&handle);
    if (s != CUDNN_STATUS_SUCCESS) {
      handle = nullptr;
      handle_error = "cudnnCreate: " + status_text(s);
      return false;
    }
    return true;
  }

  static std::unique_ptr<Plan> build(cudnnHandle_t h, sdpa::Graph g) {
    auto plan = std::make_unique<Plan>();
    const std::string problem = sdpa::validate(g);
    if (!problem.empty()) throw std::logic_error("cudnn_attention: inconsistent graph: " + problem);
    std::map<std::int64_t, std::size_t> tensor_at;
    for (const auto& t : g.tensors) {
      Desc d(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor");
      const cudnnDataType_t dt = data_type(t);
      const std::int64_t alignment = 16;
      const bool is_virtual = t.is_virtual, by_value = t.by_value;
      d.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, t.name + " data type");
      d.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, t.dims.data(), t.name + " dims");
      d.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, t.strides.data(), t.name + " strides");
      d.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &t.uid, t.name + " uid");
      d.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment, t.name + " alignment");
      d.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, t.name + " virtual");
      if (by_value) d.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, t.name + " by value");
      d.finalize("tensor " + t.name);
      tensor_at[t.uid] = plan->keep.size();
      plan->keep.push_back(std::move(d));
    }
    auto tensor = [&](std::int64_t uid) -> const Desc& { return plan->keep[tensor_at.at(uid)]; };
    std::vector<cudnnBackendDescriptor_t> ops;
    const cudnnDataType_t fp32 = CUDNN_DATA_FLOAT;
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const sdpa::Node& n = g.nodes[i];
      const std::string what = std::string("node ") + std::to_string(i) + " " + sdpa::op_name(n.op);
      if (n.op == sdpa::Op::matmul) {
        Desc md(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul");
        md.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &fp32, what + " compute type");
        md.finalize(what);
        Desc op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul operation");
        op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, tensor(n.x), what + " A");
        op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, tensor(n.b), what + " B");
        op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, tensor(n.y), what + " C");
        op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, md, what + " descriptor");
        op.finalize(what);
        ops.push_back(op.get());
        plan->keep.push_back(std::move(md));
        plan->keep.push_back(std::move(op));
      } else if (n.op == sdpa::Op::reduce_max || n.op == sdpa::Op::reduce_sum) {
        const cudnnReduceTensorOp_t mode = n.op == sdpa::Op::reduce_max ? CUDNN_REDUCE_TENSOR_MAX : CUDNN_REDUCE_TENSOR_ADD;
        Desc rd(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction");
        rd.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode, what + " operator");
        rd.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &fp32, what + " compute type");
        rd.finalize(what);
        Desc op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction operation");
        op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, tensor(n.x), what + " X");
        op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, tensor(n.y), what + " Y");
        op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, rd, what + " descriptor");
        op.finalize(what);
        ops.push_back(op.get());
        plan->keep.push_back(std::move(rd));
        plan->keep.push_back(std::move(op));
      } else {
        const cudnnPointwiseMode_t mode = pointwise_mode(n.op);
        Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise");
        pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, what + " mode");
        // The comparison computes in BOOLEAN, as cudnn_frontend's causal mask
        // sets it (diagonal_band_mask.h); the rest in fp32.
        const cudnnDataType_t boolean = CUDNN_DATA_BOOLEAN;
        pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, n.op == sdpa::Op::cmp_ge ? &boolean : &fp32,
               what + " precision");
        if (n.op == sdpa::Op::gen_index)
          pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &n.axis, what + " axis");
        pw.finalize(what);
        Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise operation");
        op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw, what + " descriptor");
        op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, tensor(n.x), what + " X");
        if (n.b != 0) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, tensor(n.b), what + " B");
        op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, tensor(n.y), what + " Y");
        if (n.t != 0) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, tensor(n.t), what + " T");
        op.finalize(what);
        ops.push_back(op.get());
        plan->keep.push_back(std::move(pw));
        plan->keep.push_back(std::move(op));
      }
    }
    Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<std::int64_t>(ops.size()),
              ops.data(), "graph operations");
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, "graph handle");
    graph.finalize("operation graph");
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "heuristics");
    heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph, "heuristics graph");
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heuristics mode");
    heur.finalize("heuristics");
    std::int64_t count = 0;
    check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                   nullptr),
          "heuristics result count");
    if (count <= 0) throw Refused("heuristics mode A found no engine for the graph");
    std::vector<Desc> cfgs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (std::int64_t i = 0; i < count; ++i) {
      cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config");
      raw.push_back(cfgs.back().get());
    }
    std::int64_t returned = 0;
    check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                   &returned, raw.data()),
          "heuristics results");
    std::string last = "no engine configuration finalized";
    // At most five: finalizing a configuration may compile it at run time
    // (seconds each), and a graph the first five refuse is not worth the rest.
    for (std::int64_t i = 0; i < std::min<std::int64_t>(returned, 5); ++i) {
      try {
        Desc ep(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan");
        ep.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, "plan handle");
        ep.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfgs[static_cast<std::size_t>(i)], "plan engine config");
        ep.finalize("execution plan " + std::to_string(i));
        std::int64_t ws = 0, got = 0;
        check(cudnnBackendGetAttribute(ep.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got,
                                       &ws),
              "plan workspace size");
        plan->ok = true;
        plan->workspace = ws;
        plan->plan = std::move(ep);
        break;
      } catch (const Refused& e) {
        last = e.what();
      }
    }
    if (!plan->ok) throw Refused(last);
    for (auto& c : cfgs) plan->keep.push_back(std::move(c));
    plan->keep.push_back(std::move(heur));
    plan->keep.push_back(std::move(graph));
    plan->graph = std::move(g);
    return plan;
  }

  /// The cached plan for `key`, built on first use; a refusal is cached too.
  Plan& plan(const std::string& key, const std::function<sdpa::Graph()>& make) {
    auto it = plans.find(key);
    if (it != plans.end()) return *it->second;
    std::unique_ptr<Plan> p;
    try {
      p = build(handle, make());
    } catch (const Refused& e) {
      p = std::make_unique<Plan>();
      p->reason = std::string("cuDNN refused the graph: ") + e.what();
    }
    return *plans.emplace(key, std::move(p)).first->second;
  }

  /// Binds the graph's device tensors and by-value scalars, then enqueues the plan.
  void execute(Plan& p, const std::map<sdpa::Bind, const void*>& buffers, cudaStream_t stream) {
    std::vector<std::int64_t> uids;
    std::vector<void*> ptrs;
    std::vector<float> scalars;
    scalars.reserve(p.graph.tensors.size());
    for (const auto& t : p.graph.tensors) {
      if (t.is_virtual) continue;
      uids.push_back(t.uid);
      if (t.by_value) {
        scalars.push_back(t.value);
        ptrs.push_back(&scalars.back());
        continue;
      }
      const auto* base = static_cast<const unsigned char*>(buffers.at(t.bind));
      ptrs.push_back(const_cast<unsigned char*>(base) + static_cast<std::size_t>(t.offset) * elem_bytes(t.dtype));
    }
    void* ws = workspace.get(static_cast<std::size_t>(p.workspace), stream);
    check(cudnnSetStream(handle, stream), "cudnnSetStream");
    Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<std::int64_t>(uids.size()),
             uids.data(), "variant pack uids");
    pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<std::int64_t>(ptrs.size()),
             ptrs.data(), "variant pack pointers");
    pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws, "variant pack workspace");
    pack.finalize("variant pack");
    const cudnnStatus_t s = cudnnBackendExecute(handle, p.plan.get(), pack.get());
    if (s != CUDNN_STATUS_SUCCESS)  // a finalized plan that fails to run is an error, not a fallback
      throw std::runtime_error("cudnn_attention: cudnnBackendExecute: " + status_text(s));
  }
};

long CudnnAttention::cudnn_version() { return static_cast<long>(cudnnGetVersion()); }
bool CudnnAttention::built_with_cudnn() { return true; }
std::string CudnnAttention::graph_api() {
#if ZTUNE_HAVE_CUDNN_FRONTEND
  return "cudnn_frontend " + std::to_string(CUDNN_FRONTEND_MAJOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_MINOR_VERSION) + " sdpa nodes";
#else
  return "hand-lowered backend graphs";
#endif
}

#else  // !ZTUNE_HAVE_CUDNN

struct CudnnAttention::Impl {
  Grow delta;
};
long CudnnAttention::cudnn_version() { return 0; }
bool CudnnAttention::built_with_cudnn() { return false; }
std::string CudnnAttention::graph_api() { return "no cuDNN"; }

#endif

CudnnAttention::CudnnAttention() : impl_(std::make_unique<Impl>()) {}
CudnnAttention::~CudnnAttention() = default;

std::size_t CudnnAttention::cached_plans() const {
#if ZTUNE_HAVE_CUDNN_FRONTEND
  return impl_->plans.size() + impl_->frontend_plans.size();
#elif ZTUNE_HAVE_CUDNN
  return impl_->plans.size();
#else
  return 0;
#endif
}

template <typename T>
void CudnnAttention::forward(T* out, float* lse, const T* qkv, int b, int t, int c, int nh, cudaStream_t stream) {
  ZT_REQUIRE(nh > 0 && c % nh == 0, "cudnn_attention: c must be a multiple of nh");
  const sdpa::Problem p{b, t, nh, c / nh, dtype_of<T>(), 0};
  std::string reason;
#if ZTUNE_HAVE_CUDNN
  sdpa::Choice ch = sdpa::choose(p, cudnn_version(), impl_->device_sm());
  if (ch.path == sdpa::Path::cudnn && !impl_->ensure_handle()) ch = {sdpa::Path::fallback, impl_->handle_error};
#if ZTUNE_HAVE_CUDNN_FRONTEND
  if (ch.path == sdpa::Path::cudnn) {
    const fe_sdpa::Built& built = impl_->frontend(p, false);
    if (built.refused.empty()) {
      impl_->execute(built, p, false, {qkv, out, lse, nullptr, nullptr}, stream);
      last_path_ = sdpa::Path::cudnn;
      last_reason_.clear();
      return;
    }
    ch.reason = "cuDNN refused the graph (cudnn_frontend " + built.refused + ")";
  }
#else
  if (ch.path == sdpa::Path::cudnn) {
    Impl::Plan& plan = impl_->plan(sdpa::cache_key(p, "fwd"), [&] { return sdpa::forward_graph(p); });
    if (plan.ok) {
      impl_->execute(plan, {{sdpa::Bind::qkv, qkv}, {sdpa::Bind::out, out}, {sdpa::Bind::stats, lse}}, stream);
      last_path_ = sdpa::Path::cudnn;
      last_reason_.clear();
      return;
    }
    ch.reason = plan.reason;
  }
#endif
  reason = ch.reason;
#else
  reason = "this build has no cuDNN (ZTUNE_HAVE_CUDNN off)";
#endif
  flash_attention_forward<T>(out, lse, qkv, b, t, c, nh, stream);
  last_path_ = sdpa::Path::fallback;
  last_reason_ = reason;
}

template <typename T>
void CudnnAttention::backward(T* dqkv, const T* dout, const T* qkv, const T* out, const float* lse, int b, int t,
                              int c, int nh, cudaStream_t stream) {
  ZT_REQUIRE(nh > 0 && c % nh == 0, "cudnn_attention: c must be a multiple of nh");
  const sdpa::Problem p{b, t, nh, c / nh, dtype_of<T>(), 0};
  const std::size_t delta_bytes = static_cast<std::size_t>(b) * nh * t * sizeof(float);
  std::string reason;
#if ZTUNE_HAVE_CUDNN
  sdpa::Choice ch = sdpa::choose(p, cudnn_version(), impl_->device_sm());
  if (ch.path == sdpa::Path::cudnn && !impl_->ensure_handle()) ch = {sdpa::Path::fallback, impl_->handle_error};
#if ZTUNE_HAVE_CUDNN_FRONTEND
  if (ch.path == sdpa::Path::cudnn) {
    const fe_sdpa::Built& built = impl_->frontend(p, true);
    if (built.refused.empty()) {
      const long n = static_cast<long>(b) * t * 3 * c;
      auto* scratch = static_cast<T*>(impl_->dqkv.get(static_cast<std::size_t>(n) * sizeof(T), stream));
      impl_->execute(built, p, true, {qkv, const_cast<T*>(out), const_cast<float*>(lse), dout, scratch}, stream);
      accumulate<T>(dqkv, scratch, n, stream);  // the Backend's backward +=
      last_path_ = sdpa::Path::cudnn;
      last_reason_.clear();
      return;
    }
    ch.reason = "cuDNN refused the graph (cudnn_frontend " + built.refused + ")";
  }
#else
  if (ch.path == sdpa::Path::cudnn) {
    Impl::Plan& dplan = impl_->plan(sdpa::cache_key(p, "bwd_delta"), [&] { return sdpa::backward_delta_graph(p); });
    Impl::Plan& plan = impl_->plan(sdpa::cache_key(p, "bwd"), [&] { return sdpa::backward_graph(p); });
    if (dplan.ok && plan.ok) {
      const long n = static_cast<long>(b) * t * 3 * c;
      auto* scratch = static_cast<T*>(impl_->dqkv.get(static_cast<std::size_t>(n) * sizeof(T), stream));
      auto* delta = static_cast<float*>(impl_->delta.get(delta_bytes, stream));
      impl_->execute(dplan, {{sdpa::Bind::dout, dout}, {sdpa::Bind::out, out}, {sdpa::Bind::delta, delta}}, stream);
      impl_->execute(plan,
                     {{sdpa::Bind::qkv, qkv}, {sdpa::Bind::dout, dout}, {sdpa::Bind::stats, lse},
                      {sdpa::Bind::delta, delta}, {sdpa::Bind::dqkv, scratch}},
                     stream);
      accumulate<T>(dqkv, scratch, n, stream);  // the Backend's backward +=
      last_path_ = sdpa::Path::cudnn;
      last_reason_.clear();
      return;
    }
    ch.reason = dplan.ok ? plan.reason : dplan.reason;
  }
#endif
  reason = ch.reason;
#else
  reason = "this build has no cuDNN (ZTUNE_HAVE_CUDNN off)";
#endif
  auto* delta = static_cast<float*>(impl_->delta.get(delta_bytes, stream));
  flash_attention_backward<T>(dqkv, delta, dout, qkv, out, lse, b, t, c, nh, stream);
  last_path_ = sdpa::Path::fallback;
  last_reason_ = reason;
}

#define ZT_CUDNN_ATTENTION(T)                                                                               \
  template void CudnnAttention::forward<T>(T*, float*, const T*, int, int, int, int, cudaStream_t);         \
  template void CudnnAttention::backward<T>(T*, const T*, const T*, const T*, const float*, int, int, int, \
                                            int, cudaStream_t);
ZT_CUDNN_ATTENTION(float)
ZT_CUDNN_ATTENTION(__half)
ZT_CUDNN_ATTENTION(__nv_bfloat16)
#undef ZT_CUDNN_ATTENTION

}  // namespace ztune::kernels::cuda
