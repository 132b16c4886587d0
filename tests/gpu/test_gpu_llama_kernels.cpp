// CUDA RoPE and grouped-query head repetition against their CPU references
// (kernels/rope.hpp, kernels/kv_repeat.hpp; those are checked against closed forms
// and finite differences in tests/kernels/test_llama_kernels.cpp), for fp32, fp16
// and bf16 storage. Inputs are rounded to the storage type first, so the CPU sees
// exactly the values the GPU sees.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "gpu_support.hpp"
#include "ztune/kernels/cuda/kv_repeat.hpp"
#include "ztune/kernels/cuda/rope.hpp"
#include "ztune/kernels/kv_repeat.hpp"
#include "ztune/kernels/rope.hpp"

using namespace ztune::kernels;
using namespace ztune::test;

namespace {

// Positions 0..n−1 in two sequences, the second starting late (large angles exercise
// sincosf's full range reduction).
std::vector<std::int32_t> positions(int n) {
  std::vector<std::int32_t> p(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) p[static_cast<std::size_t>(r)] = r < n / 2 ? r : 8000 + r;
  return p;
}

}  // namespace

TEMPLATE_TEST_CASE("RoPE forward and backward match the CPU on Q and K of a GQA row", "[gpu][rope]", float, __half,
                   __nv_bfloat16) {
  using T = TestType;
  struct Shape {
    int nh, kv, hd;
    float theta;
    int rot = 0;  // rotary dims (0: the whole head)
  };
  // The last shape is GPT-NeoX-20B's head: 24 of 96 channels turn.
  for (const Shape s : {Shape{8, 2, 128, 500000.0f}, Shape{6, 6, 64, 10000.0f}, Shape{3, 1, 18, 10000.0f},
                        Shape{4, 4, 96, 10000.0f, 24}}) {
    INFO(type_name<T>() << " nh " << s.nh << " kv " << s.kv << " hd " << s.hd << " rot " << s.rot);
    const int n = 67, stride = (s.nh + 2 * s.kv) * s.hd;
    const auto pos = positions(n);
    auto x = rounded<T>(uniform(static_cast<std::size_t>(n) * stride, 81, -2.0f, 2.0f));
    DeviceArray<T> d_x(x);
    DeviceIds d_pos(pos);
    // Q heads, then the kv K heads through the offset nh·hd; V stays as it was.
    cuda::rope_forward<T>(d_x.get(), d_pos.get(), n, stride, s.nh, s.hd, s.theta, s.rot, nullptr);
    cuda::rope_forward<T>(d_x.get() + s.nh * s.hd, d_pos.get(), n, stride, s.kv, s.hd, s.theta, s.rot, nullptr);
    cpu::rope_forward(x.data(), pos.data(), n, stride, s.nh, s.hd, s.theta, s.rot);
    cpu::rope_forward(x.data() + s.nh * s.hd, pos.data(), n, stride, s.kv, s.hd, s.theta, s.rot);
    // Same fp32 angle on both sides (rope.cu's definition); sincosf is within 2 fp32
    // ulps, then one rounding to T.
    CHECK(mismatches("rope_forward", d_x.download(), x, 2e-6f, eps_of<T>() + 4e-7f) == 0);

    auto g = rounded<T>(uniform(static_cast<std::size_t>(n) * stride, 82));
    DeviceArray<T> d_g(g);
    cuda::rope_backward<T>(d_g.get(), d_pos.get(), n, stride, s.nh, s.hd, s.theta, s.rot, nullptr);
    cuda::rope_backward<T>(d_g.get() + s.nh * s.hd, d_pos.get(), n, stride, s.kv, s.hd, s.theta, s.rot, nullptr);
    cpu::rope_backward(g.data(), pos.data(), n, stride, s.nh, s.hd, s.theta, s.rot);
    cpu::rope_backward(g.data() + s.nh * s.hd, pos.data(), n, stride, s.kv, s.hd, s.theta, s.rot);
    CHECK(mismatches("rope_backward", d_g.download(), g, 2e-6f, eps_of<T>() + 4e-7f) == 0);
  }
}

TEMPLATE_TEST_CASE("kv_repeat forward and backward match the CPU", "[gpu][kv_repeat]", float, __half,
                   __nv_bfloat16) {
  using T = TestType;
  for (const int kv : {1, 2, 8}) {
    INFO(type_name<T>() << " kv " << kv);
    const int n = 53, nh = 8, hd = 40;
    const std::size_t in_size = static_cast<std::size_t>(n) * (nh + 2 * kv) * hd;
    const std::size_t out_size = static_cast<std::size_t>(n) * 3 * nh * hd;
    const auto inp = rounded<T>(uniform(in_size, 91));
    DeviceArray<T> d_in(inp), d_out(out_size);
    cuda::kv_repeat_forward<T>(d_out.get(), d_in.get(), n, nh, kv, hd, nullptr);
    std::vector<float> out(out_size);
    cpu::kv_repeat_forward(out.data(), inp.data(), n, nh, kv, hd);
    CHECK(mismatches("kv_repeat_forward", d_out.download(), out, 0.0f, 0.0f) == 0);  // a copy: exact

    const auto dout = rounded<T>(uniform(out_size, 92));
    auto dinp = rounded<T>(uniform(in_size, 93));  // backward accumulates into this
    DeviceArray<T> d_dout(dout), d_dinp(dinp);
    cuda::kv_repeat_backward<T>(d_dinp.get(), d_dout.get(), n, nh, kv, hd, nullptr);
    cpu::kv_repeat_backward(dinp.data(), dout.data(), n, nh, kv, hd);
    // Same fp32 summation order on both sides; one rounding to T on the GPU.
    CHECK(mismatches("kv_repeat_backward", d_dinp.download(), dinp, 1e-6f, eps_of<T>()) == 0);
  }
}
