// Causal attention on the GPU against kernels/attention.hpp's CPU reference: the
// fused flash kernels (output and dqkv; the probabilities are never stored) and the
// unfused GEMM path (also the stored probabilities). Shapes: T not a multiple of the
// 32-row tiles, both supported head dimensions, more than one batch and head.
#include <catch2/catch.hpp>

#include "gpu_support.hpp"
#include "ztune/kernels/attention.hpp"
#include "ztune/kernels/cuda/attention.hpp"
#include "ztune/kernels/cuda/gemm.hpp"

using namespace ztune::kernels;
using namespace ztune::test;

namespace {

struct Reference {
  std::vector<float> qkv, dout, dqkv0, out, att, dqkv;
};

Reference reference(int b, int t, int c, int nh, bool round_bf16, bool round_half) {
  Reference r;
  const auto round = [&](std::vector<float> v) {
    if (round_bf16) return rounded<__nv_bfloat16>(std::move(v));
    if (round_half) return rounded<__half>(std::move(v));
    return v;
  };
  r.qkv = round(uniform(static_cast<std::size_t>(b) * t * 3 * c, 1, -1.5f, 1.5f));
  r.dout = round(uniform(static_cast<std::size_t>(b) * t * c, 2));
  r.dqkv0 = round(uniform(r.qkv.size(), 3));
  r.out.resize(static_cast<std::size_t>(b) * t * c);
  r.att.resize(static_cast<std::size_t>(b) * nh * t * t);
  cpu::attention_forward(r.out.data(), r.att.data(), r.qkv.data(), b, t, c, nh, nullptr);
  r.dqkv = r.dqkv0;
  cpu::attention_backward(r.dqkv.data(), r.dout.data(), r.qkv.data(), r.att.data(), b, t, c, nh, nullptr);
  return r;
}

// Outputs are convex combinations of values in [-1.5, 1.5]; gradients O(1)·√T at
// most. fp32: atol 2e-5 absorbs summation order over T ≤ 200 terms. 16-bit: the
// result's rounding (eps·|ref|), plus for the unfused path the probabilities and
// head-major copies stored in T (another eps per operand), so 4·eps atol.
template <typename T>
float attention_atol() {
  return std::is_same_v<T, float> ? 2e-5f : 4 * eps_of<T>();
}

}  // namespace

TEMPLATE_TEST_CASE("flash attention forward and backward match the CPU", "[gpu][attention]", float, __half,
                   __nv_bfloat16) {
  using T = TestType;
  for (int hd : {64, 128}) {
    const int b = 2, t = 77, nh = 3, c = nh * hd;
    INFO("head dim " << hd << ", " << type_name<T>());
    const Reference r = reference(b, t, c, nh, std::is_same_v<T, __nv_bfloat16>, std::is_same_v<T, __half>);
    DeviceArray<T> d_qkv(r.qkv), d_out(r.out.size()), d_dout(r.dout), d_dqkv(r.dqkv0);
    DeviceArray<float> d_lse(static_cast<std::size_t>(b) * nh * t), d_delta(static_cast<std::size_t>(b) * nh * t);
    cuda::flash_attention_forward<T>(d_out.get(), d_lse.get(), d_qkv.get(), b, t, c, nh, nullptr);
    CHECK(mismatches("flash out", d_out.download(), r.out, attention_atol<T>(), eps_of<T>()) == 0);
    // The log-sum-exp the backward reads, against the CPU flash kernel's (same
    // definition and layout): fp32 in both, from the same rounded inputs.
    std::vector<float> cpu_out(r.out.size()), cpu_lse(static_cast<std::size_t>(b) * nh * t);
    cpu::flash_attention_forward(cpu_out.data(), cpu_lse.data(), r.qkv.data(), b, t, c, nh, nullptr);
    CHECK(mismatches("flash lse", d_lse.download(), cpu_lse, 1e-5f, 1e-6f) == 0);
    cuda::flash_attention_backward<T>(d_dqkv.get(), d_delta.get(), d_dout.get(), d_qkv.get(), d_out.get(),
                                      d_lse.get(), b, t, c, nh, nullptr);
    // The backward reads the forward's output in T (D_i = dO·O), one more rounding.
    CHECK(mismatches("flash dqkv", d_dqkv.download(), r.dqkv, 2 * attention_atol<T>(), 2 * eps_of<T>()) == 0);
  }
}

TEMPLATE_TEST_CASE("unfused GEMM attention matches the CPU, probabilities included", "[gpu][attention]", float,
                   __half, __nv_bfloat16) {
  using T = TestType;
  const int b = 2, t = 45, nh = 4, hd = 16, c = nh * hd;  // any head dim works on this path
  const Reference r = reference(b, t, c, nh, std::is_same_v<T, __nv_bfloat16>, std::is_same_v<T, __half>);
  cuda::Gemm gemm;
  DeviceArray<T> d_qkv(r.qkv), d_out(r.out.size()), d_att(r.att.size()), d_dout(r.dout), d_dqkv(r.dqkv0);
  DeviceArray<T> ws(cuda::attention_workspace_elems(b, t, c, nh));
  cuda::attention_forward<T>(gemm, d_out.get(), d_att.get(), d_qkv.get(), ws.get(), b, t, c, nh, nullptr);
  // 16-bit: the scores are rounded to T before the softmax (|s| ≲ 8 here, so exp()
  // moves by up to eps·8/2 relative): twice the fused path's absolute tolerance.
  CHECK(mismatches("att", d_att.download(), r.att, 2 * attention_atol<T>(), eps_of<T>()) == 0);
  CHECK(mismatches("out", d_out.download(), r.out, 2 * attention_atol<T>(), eps_of<T>()) == 0);
  cuda::attention_backward<T>(gemm, d_dqkv.get(), d_dout.get(), d_qkv.get(), d_att.get(), ws.get(), b, t, c, nh,
                              nullptr);
  CHECK(mismatches("dqkv", d_dqkv.download(), r.dqkv, 4 * attention_atol<T>(), 2 * eps_of<T>()) == 0);
}

TEST_CASE("flash attention refuses a head dimension it was not built for", "[gpu][attention]") {
  DeviceArray<float> qkv(3 * 2 * 48), out(2 * 48), lse(2 * 2);
  CHECK_THROWS_AS(cuda::flash_attention_forward<float>(out.get(), lse.get(), qkv.get(), 1, 2, 48, 2, nullptr),
                  std::invalid_argument);
}
