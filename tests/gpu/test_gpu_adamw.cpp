// Multi-tensor AdamW against kernels/adamw.hpp's CPU update, applied tensor by
// tensor: 30 tensors (two launches of 24), sizes around the 16384-element chunk, an
// empty one; gradients scaled by 1/S first; the 16-bit copy equals the new master
// rounded to nearest even.
#include <catch2/catch.hpp>

#include <memory>

#include "gpu_support.hpp"
#include "ztune/kernels/adamw.hpp"
#include "ztune/kernels/cuda/adamw.hpp"
#include "ztune/kernels/multi_tensor.hpp"

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

// adamw_chunked: 300 tensors (far past one launch of adamw_multi_tensor), from a
// device chunk table built by kernels/multi_tensor.hpp, in a single launch, against
// the same CPU update; 16-bit gradients too (the gradient is read in G).
TEMPLATE_TEST_CASE("chunked AdamW updates every tensor in one launch like the CPU", "[gpu][adamw]", float, __half,
                   __nv_bfloat16) {
  using P = TestType;
  const AdamWParams h{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 3};
  const int count = 300;
  std::vector<std::int64_t> sizes;
  for (int k = 0; k < count; ++k) sizes.push_back(k % 50 == 7 ? 0 : (k * 104729L) % 20000 + 1);
  std::vector<std::vector<float>> master(count), m(count), v(count), g(count);
  std::vector<std::unique_ptr<DeviceArray<float>>> f32;
  std::vector<std::unique_ptr<DeviceArray<P>>> grads, params;
  std::vector<cuda::AdamWTensor<P, P>> list;
  for (int k = 0; k < count; ++k) {
    const auto n = static_cast<std::size_t>(sizes[static_cast<std::size_t>(k)]);
    const auto s = static_cast<std::uint32_t>(1000 + 4 * k);
    master[k] = uniform(n, s);
    m[k] = uniform(n, s + 1, -0.01f, 0.01f);
    v[k] = uniform(n, s + 2, 0.0f, 1e-4f);
    g[k] = rounded<P>(uniform(n, s + 3));  // the values the device's G holds
    for (auto* src : {&master[k], &m[k], &v[k]}) f32.push_back(std::make_unique<DeviceArray<float>>(*src));
    grads.push_back(std::make_unique<DeviceArray<P>>(g[k]));
    params.push_back(std::make_unique<DeviceArray<P>>(n));
    const std::size_t base = f32.size() - 3;
    list.push_back({f32[base]->get(), f32[base + 1]->get(), f32[base + 2]->get(), grads.back()->get(),
                    params.back()->get(), static_cast<long>(n)});
  }
  const auto table = build_chunk_table(sizes, cuda::kAdamWChunkElems);
  cuda::AdamWTensor<P, P>* d_list = nullptr;
  TensorChunk* d_table = nullptr;
  ZT_CUDA_CHECK(cudaMalloc(&d_list, list.size() * sizeof(list[0])));
  ZT_CUDA_CHECK(cudaMalloc(&d_table, table.size() * sizeof(TensorChunk)));
  ZT_CUDA_CHECK(cudaMemcpy(d_list, list.data(), list.size() * sizeof(list[0]), cudaMemcpyHostToDevice));
  ZT_CUDA_CHECK(cudaMemcpy(d_table, table.data(), table.size() * sizeof(TensorChunk), cudaMemcpyHostToDevice));
  cuda::adamw_chunked<P, P>(d_list, d_table, static_cast<int>(table.size()), h, 1.0f, nullptr);
  ZT_CUDA_CHECK(cudaDeviceSynchronize());
  cudaFree(d_list);
  cudaFree(d_table);
  for (int k = 0; k < count; ++k) {
    INFO("tensor " << k << " of " << sizes[static_cast<std::size_t>(k)] << " elements");
    cpu::adamw_update(master[k].data(), g[k].data(), m[k].data(), v[k].data(), static_cast<long>(master[k].size()), h);
    const std::size_t base = 3 * static_cast<std::size_t>(k);
    CHECK(mismatches("master", f32[base]->download(), master[k], 1e-7f, 4 * eps_of<float>()) == 0);
    CHECK(mismatches("v", f32[base + 2]->download(), v[k], 1e-12f, 4 * eps_of<float>()) == 0);
    CHECK(mismatches("param copy", params[k]->download(), rounded<P>(master[k]), 0.0f, eps_of<P>()) == 0);
  }
}
