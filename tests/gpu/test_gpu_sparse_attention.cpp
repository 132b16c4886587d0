// Block-sparse causal attention on the device against kernels/sparse_attention.hpp's
// CPU reference (itself tested against dense attention and a naive masked softmax
// in tests/kernels/test_sparse_attention.cpp): BigBird, fixed, Longformer and
// variable layouts at block sizes 16-64, forward (out and the saved block
// probabilities) and backward (dqkv accumulated onto non-zero values), in fp32,
// fp16 and bf16 storage. Inputs are rounded to the storage type first, so both
// sides compute in fp32 on the same values: fp32 differs only by summation order;
// 16-bit outputs add one rounding to the storage type (eps(T)·|ref|).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "gpu_support.hpp"
#include "ztune/kernels/block_sparse_layout.hpp"
#include "ztune/kernels/cuda/sparse_attention.hpp"
#include "ztune/kernels/sparse_attention.hpp"

using namespace ztune::kernels;
using namespace ztune::test;

namespace {

struct Case {
  BlockPattern pattern;
  const char* name;
  int t, block;
};

}  // namespace

TEMPLATE_TEST_CASE("block-sparse attention matches the CPU reference", "[gpu][sparse]", float, __half,
                   __nv_bfloat16) {
  using T = TestType;
  const int b = 2, c = 128, nh = 2;  // head dimension 64
  const std::vector<Case> cases{{BlockPattern::bigbird, "bigbird", 256, 32},
                                {BlockPattern::fixed, "fixed", 256, 16},
                                {BlockPattern::longformer, "longformer", 256, 64},
                                {BlockPattern::variable, "variable", 192, 16},
                                {BlockPattern::dense, "dense", 128, 32}};
  const float out_atol = 1e-5f, grad_atol = 3e-5f, rtol = std::is_same_v<T, float> ? 16 * eps_of<float>() : eps_of<T>();
  for (const Case& k : cases) {
    INFO(type_name<T>() << " " << k.name << " layout, T " << k.t << ", block " << k.block);
    const BlockLayout layout = make_block_layout(k.pattern, k.t, k.block, 7);
    const std::vector<float> qkv = rounded<T>(uniform(static_cast<std::size_t>(b) * k.t * 3 * c, 41));
    const std::vector<float> dout = rounded<T>(uniform(static_cast<std::size_t>(b) * k.t * c, 42));
    std::vector<float> dqkv = rounded<T>(uniform(qkv.size(), 43, -0.5f, 0.5f));
    const auto att_elems = static_cast<std::size_t>(b) * nh * static_cast<std::size_t>(layout.nnz()) *
                           static_cast<std::size_t>(k.block) * static_cast<std::size_t>(k.block);

    DeviceIds d_row_ptr(layout.row_ptr), d_cols(layout.cols);
    const cuda::DeviceBlockLayout d_layout{d_row_ptr.get(), d_cols.get(), layout.blocks, layout.block, layout.nnz()};
    REQUIRE(cuda::sparse_attention_att_elems(b, nh, d_layout) == att_elems);
    DeviceArray<T> d_qkv(qkv), d_dout(dout), d_dqkv(dqkv), d_out(static_cast<std::size_t>(b) * k.t * c);
    DeviceArray<float> d_att(att_elems), d_ws(att_elems);
    cuda::sparse_attention_forward<T>(d_out.get(), d_att.get(), d_qkv.get(), b, k.t, c, nh, d_layout, nullptr);
    cuda::sparse_attention_backward<T>(d_dqkv.get(), d_ws.get(), d_dout.get(), d_qkv.get(), d_att.get(), b, k.t, c,
                                       nh, d_layout, nullptr);

    std::vector<float> out(static_cast<std::size_t>(b) * k.t * c), att(att_elems);
    cpu::sparse_attention_forward(out.data(), att.data(), qkv.data(), b, k.t, c, nh, layout, nullptr);
    cpu::sparse_attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), b, k.t, c, nh, layout, nullptr);

    // Probabilities are fp32 for every T: exp of scores that differ by summation order.
    CHECK(mismatches("att", d_att.download(), att, 2e-6f, 32 * eps_of<float>()) == 0);
    CHECK(mismatches("out", d_out.download(), out, out_atol, rtol) == 0);
    CHECK(mismatches("dqkv", d_dqkv.download(), dqkv, grad_atol, rtol) == 0);
  }
}
