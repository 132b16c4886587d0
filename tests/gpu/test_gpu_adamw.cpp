// Multi-tensor AdamW against kernels/adamw.hpp's CPU update, applied tensor by
// tensor: 30 tensors (two launches of 24), sizes around the 16384-element chunk, an
// empty one; gradients scaled by 1/S first; the 16-bit copy equals the new master
// rounded to nearest even.
#include <catch2/catch.hpp>

#include <memory>

#include "gpu_support.hpp"
#include "ztune/kernels/adamw.hpp"
#include "ztune/kernels/cuda/adamw.hpp"

using namespace ztune::kernels;
using namespace ztune::test;

TEMPLATE_TEST_CASE("multi-tensor AdamW matches the CPU update", "[gpu][adamw]", float, __half, __nv_bfloat16) {
  using P = TestType;  // parameter copy; gradients fp32
  const AdamWParams h{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 7};
  const float loss_scale = 1024.0f;
  const int count = 30;
  std::vector<long> sizes;
  for (int k = 0; k < count; ++k) sizes.push_back(k == 5 ? 0 : (k * 7919L) % 40000 + (k % 3 == 0 ? 16384 : 1));
  struct Host {
    std::vector<float> master, m, v, g;
  };
  std::vector<Host> host(count);
  std::vector<std::unique_ptr<DeviceArray<float>>> dev_f32;
  std::vector<std::unique_ptr<DeviceArray<P>>> dev_param;
  std::vector<cuda::AdamWTensor<float, P>> list;
  for (int k = 0; k < count; ++k) {
    const auto n = static_cast<std::size_t>(sizes[k]);
    const auto s = static_cast<std::uint32_t>(100 + 4 * k);
    host[k] = {uniform(n, s), uniform(n, s + 1, -0.01f, 0.01f), uniform(n, s + 2, 0.0f, 1e-4f),
               uniform(n, s + 3, -loss_scale, loss_scale)};
    cuda::AdamWTensor<float, P> t;
    for (auto* src : {&host[k].master, &host[k].m, &host[k].v, &host[k].g})
      dev_f32.push_back(std::make_unique<DeviceArray<float>>(*src));
    const std::size_t base = dev_f32.size() - 4;
    dev_param.push_back(std::make_unique<DeviceArray<P>>(n));
    t.master = dev_f32[base]->get();
    t.m = dev_f32[base + 1]->get();
    t.v = dev_f32[base + 2]->get();
    t.grad = dev_f32[base + 3]->get();
    t.param = dev_param.back()->get();
    t.n = sizes[k];
    list.push_back(t);
  }
  cuda::adamw_multi_tensor<float, P>(list.data(), count, h, 1.0f / loss_scale, nullptr);
  for (int k = 0; k < count; ++k) {
    INFO("tensor " << k << " of " << sizes[k] << " elements");
    auto& r = host[k];
    for (auto& g : r.g) g /= loss_scale;  // a power of two: exact, as on the device
    cpu::adamw_update(r.master.data(), r.g.data(), r.m.data(), r.v.data(), sizes[k], h);
    const std::size_t base = 4 * static_cast<std::size_t>(k);
    // Same operations in the same order in fp32; sqrtf and division are correctly
    // rounded on both sides, so only fused multiply-adds may differ (a few ulps).
    CHECK(mismatches("master", dev_f32[base]->download(), r.master, 1e-7f, 4 * eps_of<float>()) == 0);
    CHECK(mismatches("m", dev_f32[base + 1]->download(), r.m, 1e-9f, 4 * eps_of<float>()) == 0);
    CHECK(mismatches("v", dev_f32[base + 2]->download(), r.v, 1e-12f, 4 * eps_of<float>()) == 0);
    CHECK(mismatches("param copy", dev_param[k]->download(), rounded<P>(r.master), 0.0f, eps_of<P>()) == 0);
  }
}
