// 16-bit storage on the CUDA backend (issue 24 item 3): MixedPrecisionParams over
// the CudaBackend keeps bf16/fp16 parameter and gradient copies and fp32 masters
// and Adam states, counted 2 + 2 + 4 + 8 bytes per parameter, and its step (one
// adamw_chunked launch through Backend::adamw_fused) equals kernels/adamw.hpp's
// update on the host, with the 16-bit copies the rounded new masters. Written
// without a device: never run yet.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backend_support.hpp"
#include "gpu_support.hpp"
#include "ztune/executor/cuda/cuda_backend.hpp"
#include "ztune/executor/mixed_precision_params.hpp"
#include "ztune/kernels/adamw.hpp"

using namespace ztune::executor;
using namespace ztune::test;

TEMPLATE_TEST_CASE("the CUDA backend's 16-bit storage steps like the host AdamW", "[gpu][mixed]", __nv_bfloat16,
                   __half) {
  using P = TestType;
  const StorageDtype dtype = ztune::executor::test::storage_of<P>();
  cuda::CudaBackend be;
  const std::vector<std::int64_t> sizes{70000, 1, 0, 768, 3 * 768, 16384};
  MixedPrecisionParams mp(be, sizes, dtype);
  const std::size_t n = mp.numel();
  CHECK(be.memory().current(MemCategory::params) == 2 * n);
  CHECK(be.memory().current(MemCategory::grads) == 2 * n);
  CHECK(be.memory().current(MemCategory::optimizer) == 12 * n);
  auto master = uniform(n, 11), m = uniform(n, 12, -0.01f, 0.01f), v = uniform(n, 13, 0.0f, 1e-4f);
  const float loss_scale = 4096.0f;
  auto g = rounded<P>(uniform(n, 14, -loss_scale, loss_scale));
  DeviceArray<P> g16(g);
  // On the backend's stream: its buffer was zeroed there, and the step reads it
  // there (a legacy-stream copy is ordered with neither: the stream is non-blocking).
  ZT_CUDA_CHECK(cudaMemcpyAsync(mp.grads().raw(), g16.get(), n * sizeof(P), cudaMemcpyDeviceToDevice,
                                be.compute_stream()));
  ZT_CUDA_CHECK(cudaStreamSynchronize(be.compute_stream()));
  be.from_host(mp.master(), master.data(), n);
  be.from_host(mp.m().data(), m.data(), n);
  be.from_host(mp.v().data(), v.data(), n);
  const ztune::kernels::AdamWParams h{3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 2};
  for (int step = 0; step < 2; ++step) {  // the second call reuses the cached device table
    mp.step(h, 1.0f / loss_scale);
    for (auto& x : g) x /= loss_scale;
    ztune::kernels::cpu::adamw_update(master.data(), g.data(), m.data(), v.data(), static_cast<long>(n), h);
    for (auto& x : g) x *= loss_scale;  // the device gradient is unchanged
  }
  be.fence();
  std::vector<float> got(n);
  be.to_host(got.data(), mp.master(), n);
  CHECK(mismatches("master", got, master, 1e-7f, 8 * eps_of<float>()) == 0);
  std::vector<P> copy(n);
  ZT_CUDA_CHECK(cudaMemcpy(copy.data(), mp.params().raw(), n * sizeof(P), cudaMemcpyDeviceToHost));
  std::vector<float> copy_f(n);
  for (std::size_t i = 0; i < n; ++i) copy_f[i] = to_float(copy[i]);
  CHECK(mismatches("16-bit copy", copy_f, rounded<P>(master), 0.0f, eps_of<P>()) == 0);
}
