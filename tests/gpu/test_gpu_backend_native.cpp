// CudaBackend's memory-bound kernels on 16-bit stored values (the *_native
// hooks, executor/cuda/src/cuda_backend_native.cpp) against CpuBackend, the
// oracle: it widens every 16-bit operand to fp32, runs its reference kernel
// (itself checked against finite differences and NumPy elsewhere) and rounds
// the result back (Backend's staging). Both compute in fp32 on the same
// rounded inputs, so they agree to a rounding of the storage type; the
// standard attention, whose 16-bit GEMMs round the scores before the softmax,
// to a few.
//
// Inputs are converted on the host and uploaded as stored, so the GPU's
// workspace peak counts only what the op itself staged: nothing where every
// operand shares the 16-bit type, exactly the fp32 copy of a 16-bit weight or
// table gradient where the kernel sums one in fp32, everything where operand
// types mix (the fallback).
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backend_support.hpp"
#include "gpu_support.hpp"
#include "ztune/executor/cpu_backend.hpp"
#include "ztune/executor/cuda/cuda_backend.hpp"
#include "ztune/kernels/block_sparse_layout.hpp"

using namespace ztune::executor;
using ztune::executor::test::gemms_in;
using ztune::executor::test::storage_of;
using ztune::test::mismatches;
using ztune::test::uniform;

namespace {

using Host = std::vector<float>;
constexpr float kEps = 1e-5f;

/// One backend's named tensors, uploaded and read back through host-side
/// conversion (never the backend's workspace).
class Tensors {
 public:
  Tensors(Backend& be, StorageDtype d) : be_(be), d_(d) {}
  /// A tensor of the case's 16-bit type (or `dtype`) holding v rounded.
  TensorRef in(const std::string& name, const Host& v) { return in(name, v, d_); }
  TensorRef in(const std::string& name, const Host& v, StorageDtype dtype) {
    Buffer b = be_.allocate(v.size(), MemCategory::activations, dtype);
    std::vector<std::uint16_t> half(v.size());
    const void* src = v.data();
    if (dtype != StorageDtype::fp32) {
      convert_host(half.data(), dtype, v.data(), StorageDtype::fp32, v.size());
      src = half.data();
    }
    be_.from_host(b.ref(), src, v.size());
    return put(name, std::move(b));
  }
  /// An fp32 tensor of n zeros (statistics, losses).
  float* f32(const std::string& name, std::size_t n) {
    return static_cast<float*>(put(name, be_.allocate(n, MemCategory::activations)).ptr);
  }
  Host get(const std::string& name) {
    const Buffer& b = bufs_.at(name);
    const TensorRef r = b.ref();
    Host out(b.size());
    if (r.is_fp32()) {
      be_.to_host(out.data(), r, b.size());
      return out;
    }
    std::vector<std::uint16_t> half(b.size());
    be_.to_host(half.data(), r, b.size());
    convert_host(out.data(), StorageDtype::fp32, half.data(), r.dtype, b.size());
    return out;
  }
  [[nodiscard]] StorageDtype dtype() const { return d_; }

 private:
  TensorRef put(const std::string& name, Buffer b) {
    const TensorRef r = b.ref();
    bufs_.insert_or_assign(name, std::move(b));
    return r;
  }
  Backend& be_;
  StorageDtype d_;
  std::map<std::string, Buffer> bufs_;
};

struct Results {
  std::map<std::string, Host> cpu, gpu;
  std::size_t gpu_staged = 0;  // bytes: the GPU's workspace peak
};


/// Runs `op` on a fresh CpuBackend and a fresh CudaBackend and reads `outputs` back from both.
Results run_both(StorageDtype d, const std::vector<std::string>& outputs,
                 const std::function<void(Backend&, Tensors&)>& op) {
  Results r;
  CpuBackend cpu(2);
  cuda::CudaBackend gpu(gemms_in(d));
  for (Backend* be : {static_cast<Backend*>(&cpu), static_cast<Backend*>(&gpu)}) {
    Tensors t(*be, d);
    op(*be, t);
    be->fence();
    auto& into = be == &cpu ? r.cpu : r.gpu;
    for (const std::string& name : outputs) into[name] = t.get(name);
  }
  r.gpu_staged = gpu.memory().peak(MemCategory::workspace);
  return r;
}

/// Every output within `ulps` roundings of the storage type (and atol) of the CPU's.
void check(const Results& r, float ulp, float ulps = 2, float atol = kEps) {
  for (const auto& [name, ref] : r.cpu) CHECK(mismatches(name, r.gpu.at(name), ref, atol, ulps * ulp) == 0);
}

constexpr int kN = 48, kC = 64;

}  // namespace

TEMPLATE_TEST_CASE("CUDA backend's 16-bit norms, activations and adds stage nothing and match the CPU",
                   "[gpu][backend][native]", __nv_bfloat16, __half) {
  const StorageDtype d = storage_of<TestType>();
  const float ulp = ztune::test::eps_of<TestType>();
  const std::size_t nc = static_cast<std::size_t>(kN) * kC;
  SECTION("LayerNorm forward and backward, 16-bit weight gradients through an fp32 copy") {
    const Results r = run_both(d, {"y", "mean", "rstd", "dx", "dw", "db"}, [&](Backend& be, Tensors& t) {
      const TensorRef x = t.in("x", uniform(nc, 1)), w = t.in("w", uniform(kC, 2, 0.8f, 1.2f));
      const TensorRef b = t.in("b", uniform(kC, 3, -0.1f, 0.1f)), y = t.in("y", Host(nc));
      float* mean = t.f32("mean", kN);
      float* rstd = t.f32("rstd", kN);
      be.layernorm_forward(y, mean, rstd, x, w, b, kN, kC, 1e-5f);
      const TensorRef dx = t.in("dx", uniform(nc, 4, -0.1f, 0.1f)), dw = t.in("dw", uniform(kC, 5, -0.1f, 0.1f));
      const TensorRef db = t.in("db", uniform(kC, 6, -0.1f, 0.1f));
      be.layernorm_backward(dx, dw, db, t.in("dy", uniform(nc, 7)), x, w, mean, rstd, kN, kC);
    });
    check(r, ulp);
    CHECK(r.gpu_staged == 2 * kC * sizeof(float));  // dw and db widened, nothing else
  }
  SECTION("RMSNorm forward and backward, an fp32 weight gradient read directly") {
    const Results r = run_both(d, {"y", "rstd", "dx", "dw"}, [&](Backend& be, Tensors& t) {
      const TensorRef x = t.in("x", uniform(nc, 11)), w = t.in("w", uniform(kC, 12, 0.8f, 1.2f));
      const TensorRef y = t.in("y", Host(nc));
      float* rstd = t.f32("rstd", kN);
      be.rmsnorm_forward(y, rstd, x, w, kN, kC, 1e-6f);
      const TensorRef dx = t.in("dx", Host(nc)), dw = t.in("dw", uniform(kC, 13, -0.1f, 0.1f), StorageDtype::fp32);
      be.rmsnorm_backward(dx, dw, t.in("dy", uniform(nc, 14)), x, w, rstd, kN, kC);
    });
    check(r, ulp);
    CHECK(r.gpu_staged == 0);
  }
  SECTION("GELU, SwiGLU, residual add, accumulate, scale, bias and its gradient") {
    const int f = 96;
    const std::size_t nf = static_cast<std::size_t>(kN) * f;
    const Results r = run_both(d, {"g", "dg", "s", "ds", "sum", "acc", "xb", "dbias"}, [&](Backend& be, Tensors& t) {
      const TensorRef a = t.in("a", uniform(nc, 21)), g = t.in("g", Host(nc)), dg = t.in("dg", uniform(nc, 22));
      be.gelu_forward(g, a, static_cast<long>(nc));
      be.gelu_backward(dg, a, t.in("dga", uniform(nc, 23)), static_cast<long>(nc));
      const TensorRef gu = t.in("gu", uniform(2 * nf, 24)), s = t.in("s", Host(nf));
      be.swiglu_forward(s, gu, kN, f);
      const TensorRef ds = t.in("ds", uniform(2 * nf, 25, -0.1f, 0.1f));
      be.swiglu_backward(ds, gu, t.in("dsa", uniform(nf, 26)), kN, f);
      const TensorRef sum = t.in("sum", Host(nc)), acc = t.in("acc", uniform(nc, 27));
      be.add(sum, a, t.in("b", uniform(nc, 28)), static_cast<long>(nc));
      be.accumulate(acc, sum, static_cast<long>(nc));
      be.scale(acc, 0.37f, static_cast<long>(nc));
      const TensorRef xb = t.in("xb", uniform(nc, 29));
      be.add_bias(xb, t.in("bias", uniform(kC, 30)), kN, kC);
      be.bias_backward(t.in("dbias", uniform(kC, 31, -0.1f, 0.1f)), a, kN, kC);
    });
    check(r, ulp);
    CHECK(r.gpu_staged == kC * sizeof(float));  // the 16-bit bias gradient widened
  }
  SECTION("Σx² of a 16-bit tensor") {
    const Host v = uniform(nc * 3 + 5, 41);
    double cpu_sq = 0, gpu_sq = 0;
    CpuBackend cpu(2);
    cuda::CudaBackend gpu;
    for (Backend* be : {static_cast<Backend*>(&cpu), static_cast<Backend*>(&gpu)}) {
      Tensors t(*be, d);
      (be == &cpu ? cpu_sq : gpu_sq) = be->sum_squares(t.in("x", v), static_cast<long>(v.size()));
    }
    // The kernel adds in fp32 (each thread's few terms, then a block's tree) and
    // the blocks' partials in double; the CPU adds in double. The fp32 sums'
    // error is at most about (additions on a path) · 2^-24 of Σx² (Higham 2002,
    // §4.2): under 16 · 6e-8 ≈ 1e-6 here (a simulation of the kernel's order
    // gives ~1e-8, 3e-8 at worst, beyond the 1e-9 this had asked).
    CHECK(gpu_sq == Approx(cpu_sq).epsilon(1e-6));
    CHECK(gpu.memory().peak(MemCategory::workspace) == 0);
  }
  SECTION("mixed operand types take the staged fp32 kernels: same values, staged copies") {
    const Results r = run_both(d, {"sum"}, [&](Backend& be, Tensors& t) {
      be.add(t.in("sum", Host(nc)), t.in("a", uniform(nc, 51)), t.in("b", uniform(nc, 52), StorageDtype::fp32),
             static_cast<long>(nc));
    });
    check(r, ulp);
    CHECK(r.gpu_staged > 0);
  }
}

TEMPLATE_TEST_CASE("CUDA backend's 16-bit embedding, rotary, GQA and cross-entropy kernels match the CPU",
                   "[gpu][backend][native]", __nv_bfloat16, __half) {
  const StorageDtype d = storage_of<TestType>();
  const float ulp = ztune::test::eps_of<TestType>();
  SECTION("a vocabulary shard's embedding: lookup, and its gradient into a 16-bit and an fp32 table") {
    const int v = 101, begin = 20, rows = 60;
    std::vector<std::int32_t> ids(kN);
    for (int i = 0; i < kN; ++i) ids[static_cast<std::size_t>(i)] = (i * 37 + 5) % v;  // repeats, and ids off the shard
    const std::size_t table = static_cast<std::size_t>(rows) * kC;
    for (const StorageDtype grad : {d, StorageDtype::fp32}) {
      INFO("table gradient " << storage_name(grad));
      const Results r = run_both(d, {"x", "dt"}, [&](Backend& be, Tensors& t) {
        const TensorRef x = t.in("x", Host(static_cast<std::size_t>(kN) * kC));
        be.embedding_forward(x, ids.data(), t.in("wte", uniform(table, 61)), kN, kC, begin, rows);
        const TensorRef dt = t.in("dt", uniform(table, 62, -0.1f, 0.1f), grad);
        be.embedding_backward(dt, t.in("dx", uniform(static_cast<std::size_t>(kN) * kC, 63)), ids.data(), kN, kC,
                              begin, rows);
      });
      check(r, ulp);
      CHECK(r.gpu_staged == (grad == d ? table * sizeof(float) : 0));
    }
  }
  SECTION("rotary embedding of Q and K in a fused Q|K|V row, forward and backward") {
    const int heads = 4, hd = 16, stride = 3 * heads * hd;
    std::vector<std::int32_t> pos(kN);
    for (int i = 0; i < kN; ++i) pos[static_cast<std::size_t>(i)] = i % 24;
    const Results r = run_both(d, {"q", "dq"}, [&](Backend& be, Tensors& t) {
      const auto n = static_cast<std::size_t>(kN) * stride;
      be.rope_forward(t.in("q", uniform(n, 71)), pos.data(), kN, stride, 2 * heads, hd, 0, 10000.0f);
      be.rope_backward(t.in("dq", uniform(n, 72)), pos.data(), kN, stride, 2 * heads, hd, hd / 2, 500000.0f);
    });
    check(r, ulp);
    CHECK(r.gpu_staged == 0);
  }
  SECTION("grouped-query heads repeated, and their gradients summed back") {
    const int nh = 4, kv = 2, hd = 16;
    const Results r = run_both(d, {"out", "dinp"}, [&](Backend& be, Tensors& t) {
      const auto rows = static_cast<std::size_t>(kN);
      const TensorRef out = t.in("out", Host(rows * 3 * nh * hd));
      be.kv_repeat_forward(out, t.in("inp", uniform(rows * (nh + 2 * kv) * hd, 81)), kN, nh, kv, hd);
      const TensorRef dinp = t.in("dinp", uniform(rows * (nh + 2 * kv) * hd, 82, -0.1f, 0.1f));
      be.kv_repeat_backward(dinp, t.in("dout", uniform(rows * 3 * nh * hd, 83)), kN, nh, kv, hd);
    });
    check(r, ulp);
    CHECK(r.gpu_staged == 0);
  }
  SECTION("cross-entropy on 16-bit logits of a vocabulary shard: statistics, loss and gradient") {
    const int v = 101, begin = 101;  // the second shard of a 202-token vocabulary
    std::vector<std::int32_t> targets(kN);
    for (int i = 0; i < kN; ++i) targets[static_cast<std::size_t>(i)] = (i * 53 + 11) % 202;
    const Results r = run_both(d, {"max", "sum", "tl", "loss", "dl"}, [&](Backend& be, Tensors& t) {
      const TensorRef logits = t.in("logits", uniform(static_cast<std::size_t>(kN) * v, 91, -4.0f, 4.0f));
      float *mx = t.f32("max", kN), *sum = t.f32("sum", kN), *tl = t.f32("tl", kN), *loss = t.f32("loss", kN);
      be.ce_row_max(mx, logits, kN, v);
      be.ce_row_sumexp(sum, logits, mx, kN, v);
      be.ce_target_logit(tl, logits, targets.data(), kN, v, begin);
      be.ce_loss(loss, mx, sum, tl, kN);
      const TensorRef dl = t.in("dl", uniform(static_cast<std::size_t>(kN) * v, 92, -0.01f, 0.01f));
      be.ce_backward(dl, logits, mx, sum, targets.data(), t.in("dloss", Host(kN, 1.0f / kN), StorageDtype::fp32).f32(),
                     kN, v, begin);
    });
    check(r, ulp);
    CHECK(r.gpu_staged == 0);
  }
}

TEMPLATE_TEST_CASE("CUDA backend's 16-bit standard and block-sparse attention match the CPU's staged kernels",
                   "[gpu][backend][native]", __nv_bfloat16, __half) {
  const StorageDtype d = storage_of<TestType>();
  const float ulp = ztune::test::eps_of<TestType>();
  SECTION("standard attention: 16-bit products and probabilities") {
    const int b = 2, t = 33, nh = 2, c = 64;
    const auto rows = static_cast<std::size_t>(b) * t;
    const Results r = run_both(d, {"out", "att", "dqkv"}, [&](Backend& be, Tensors& x) {
      const TensorRef qkv = x.in("qkv", uniform(rows * 3 * c, 101)), out = x.in("out", Host(rows * c));
      const TensorRef att = x.in("att", Host(Backend::attention_state_elems(b, t, nh, false)));
      be.attention_forward(out, att, qkv, b, t, c, nh, false);
      const TensorRef dqkv = x.in("dqkv", uniform(rows * 3 * c, 102, -0.01f, 0.01f));
      be.attention_backward(dqkv, x.in("dout", uniform(rows * c, 103)), qkv, out, att, b, t, c, nh, false);
    });
    // The scores are rounded to the storage type before the softmax (the CPU keeps them fp32).
    check(r, ulp, 8, 2e-3f);
    CHECK(r.gpu_staged == 0);
  }
  SECTION("block-sparse attention: fp32 probabilities of a 16-bit state through a copy") {
    const int b = 1, t = 128, nh = 2, c = 128;
    const auto layout = ztune::kernels::make_block_layout(ztune::kernels::BlockPattern::fixed, t, 32, 7);
    const std::size_t elems = static_cast<std::size_t>(b) * nh * layout.nnz() * 32 * 32;
    const auto rows = static_cast<std::size_t>(b) * t;
    const Results r = run_both(d, {"out", "att", "dqkv"}, [&](Backend& be, Tensors& x) {
      const TensorRef qkv = x.in("qkv", uniform(rows * 3 * c, 111)), out = x.in("out", Host(rows * c));
      const TensorRef att = x.in("att", Host(elems));
      be.sparse_attention_forward(out, att, qkv, b, t, c, nh, layout);
      const TensorRef dqkv = x.in("dqkv", Host(rows * 3 * c));
      be.sparse_attention_backward(dqkv, x.in("dout", uniform(rows * c, 112)), qkv, att, b, t, c, nh, layout);
    });
    check(r, ulp, 4, 1e-4f);
    CHECK(r.gpu_staged == elems * sizeof(float));  // the probabilities, once each way
  }
}

TEMPLATE_TEST_CASE("CUDA backend's fused AdamW keeps 16-bit states at their own dtypes like the CPU's staged step",
                   "[gpu][backend][native][adamw]", __nv_bfloat16, __half) {
  // Each combination adam_states_native admits (vocab/executor_support.hpp):
  // states fp32 or the parameters' type, gradients fp32 or 16-bit, and an fp32
  // model's 16-bit moments. The CPU widens the states a chunk at a time, steps
  // them in fp32 and rounds them back; the GPU's one launch does the same
  // arithmetic element by element, reading and writing the stored values, so
  // it stages nothing. Two steps, the second reusing the device table.
  const StorageDtype d = storage_of<TestType>();
  const float ulp = ztune::test::eps_of<TestType>();
  const std::size_t n = 70000;  // crosses the CPU's 2^14-element chunks and the kernel's rows
  struct Combo {
    StorageDtype grad, param, master, moments;
  };
  const StorageDtype f = StorageDtype::fp32;
  for (const Combo k : {Combo{d, d, d, d}, Combo{d, d, f, d}, Combo{f, d, d, f}, Combo{f, d, d, d},
                        Combo{f, f, f, d}}) {
    INFO("grad " << storage_name(k.grad) << ", param " << storage_name(k.param) << ", master "
                 << storage_name(k.master) << ", moments " << storage_name(k.moments));
    const bool copy = k.param != f;
    std::vector<std::string> outputs{"master", "m", "v"};
    if (copy) outputs.emplace_back("param");
    const Results r = run_both(d, outputs, [&](Backend& be, Tensors& t) {
      AdamWSpan s;
      s.master = t.in("master", uniform(n, 201), k.master).ptr;
      s.m = t.in("m", uniform(n, 202, -0.01f, 0.01f), k.moments).ptr;
      s.v = t.in("v", uniform(n, 203, 0.0f, 1e-4f), k.moments).ptr;
      s.grad = t.in("g", uniform(n, 204, -64.0f, 64.0f), k.grad).ptr;
      if (copy) s.param = t.in("param", Host(n), k.param).ptr;
      s.n = static_cast<long>(n);
      const AdamWStates states{k.master, k.moments};
      for (int step = 1; step <= 2; ++step)
        be.adamw_fused({&s, 1}, k.grad, k.param, {3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, step}, 1.0f / 64, states);
    });
    check(r, ulp, 1, 1e-7f);
    CHECK(r.gpu_staged == 0);
  }
}

TEMPLATE_TEST_CASE("CUDA backend's ZeRO++ quantize-dequantize works on a 16-bit bucket in place",
                   "[gpu][backend][native][zeropp]", __nv_bfloat16, __half) {
  // int8 weights (qwZ) and int4 gradients (qgZ) in groups of 2048 with a ragged
  // last group: the GPU reads the stored values, scales and rounds in fp32 and
  // stores the result rounded, as the CPU's staged fp32 kernel does.
  const StorageDtype d = storage_of<TestType>();
  const float ulp = ztune::test::eps_of<TestType>();
  const long n = 3 * 2048 + 500;
  for (const int bits : {8, 4}) {
    INFO("bits " << bits);
    const Results r = run_both(d, {"x"}, [&](Backend& be, Tensors& t) {
      be.quantize_dequantize(t.in("x", uniform(static_cast<std::size_t>(n), 121 + bits, -3.0f, 3.0f)), n, bits, 2048);
    });
    check(r, ulp, 1, 0.0f);
    CHECK(r.gpu_staged == 0);
  }
}
