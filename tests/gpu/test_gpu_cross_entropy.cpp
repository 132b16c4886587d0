// Softmax cross-entropy on the GPU against kernels/cross_entropy.hpp: the pieces on
// a vocabulary shard (targets inside and outside it), and the fused
// forward/backward in place on the logits.
#include <catch2/catch.hpp>

#include "gpu_support.hpp"
#include "ztune/kernels/cross_entropy.hpp"
#include "ztune/kernels/cuda/cross_entropy.hpp"

using namespace ztune::kernels;
using namespace ztune::test;

TEMPLATE_TEST_CASE("cross-entropy pieces on a vocabulary shard match the CPU", "[gpu][cross_entropy]", float, __half,
                   __nv_bfloat16) {
  using T = TestType;
  const int n = 37, v = 5003, vocab_begin = 5003;  // this rank holds [5003, 10006) of 15009
  std::vector<std::int32_t> targets(n);
  for (int i = 0; i < n; ++i) targets[i] = (i * 409) % 15009;
  auto logits = rounded<T>(uniform(static_cast<std::size_t>(n) * v, 1, -8.0f, 8.0f));
  auto dlogits0 = rounded<T>(uniform(logits.size(), 2, -1e-3f, 1e-3f));
  auto dloss = uniform(n, 3, 0.5f, 1.0f);
  DeviceIds d_t(targets);
  DeviceArray<T> d_logits(logits), d_dlogits(dlogits0);
  DeviceArray<float> d_max(n), d_sum(n), d_tl(n), d_loss(n), d_dloss(dloss);
  cuda::ce_row_max<T>(d_max.get(), d_logits.get(), n, v, nullptr);
  cuda::ce_row_sumexp<T>(d_sum.get(), d_logits.get(), d_max.get(), n, v, nullptr);
  cuda::ce_target_logit<T>(d_tl.get(), d_logits.get(), d_t.get(), n, v, vocab_begin, nullptr);
  cuda::ce_loss(d_loss.get(), d_max.get(), d_sum.get(), d_tl.get(), n, nullptr);
  cuda::ce_backward<T>(d_dlogits.get(), d_logits.get(), d_max.get(), d_sum.get(), d_t.get(), d_dloss.get(), n, v,
                       vocab_begin, nullptr);
  std::vector<float> mx(n), sum(n), tl(n), loss(n);
  auto dlogits = dlogits0;
  cpu::cross_entropy_row_max(mx.data(), logits.data(), n, v);
  cpu::cross_entropy_row_sumexp(sum.data(), logits.data(), mx.data(), n, v);
  cpu::cross_entropy_target_logit(tl.data(), logits.data(), targets.data(), n, v, vocab_begin);
  cpu::cross_entropy_loss(loss.data(), mx.data(), sum.data(), tl.data(), n);
  cpu::cross_entropy_backward(dlogits.data(), logits.data(), mx.data(), sum.data(), targets.data(), dloss.data(), n,
                              v, vocab_begin);
  CHECK(mismatches("row_max", d_max.download(), mx, 0.0f, 0.0f) == 0);  // a max is exact
  // 5003 exp terms summed in another order: relative error ≲ 5003·2^-24.
  CHECK(mismatches("row_sumexp", d_sum.download(), sum, 0.0f, 3e-4f) == 0);
  CHECK(mismatches("target_logit", d_tl.download(), tl, 0.0f, 0.0f) == 0);
  CHECK(mismatches("loss", d_loss.download(), loss, 1e-4f, 1e-5f) == 0);
  // Softmax values ≤ 1 times dloss ≤ 1, added to |dlogits0| ≤ 1e-3, rounded to T.
  CHECK(mismatches("dlogits", d_dlogits.download(), dlogits, 1e-6f, eps_of<T>() + 3e-4f) == 0);
}

TEMPLATE_TEST_CASE("fused cross-entropy overwrites the logits with their gradient", "[gpu][cross_entropy]", float,
                   __half, __nv_bfloat16) {
  using T = TestType;
  const int n = 64, v = 50257;  // GPT-2's vocabulary: more than 512 threads × 64 per row
  const float dloss = 1.0f / n;
  std::vector<std::int32_t> targets(n);
  for (int i = 0; i < n; ++i) targets[i] = (i * 7919) % v;
  auto logits = rounded<T>(uniform(static_cast<std::size_t>(n) * v, 4, -10.0f, 10.0f));
  DeviceIds d_t(targets);
  DeviceArray<T> d_logits(logits);
  DeviceArray<float> d_loss(n);
  cuda::ce_fused_forward_backward<T>(d_loss.get(), d_logits.get(), d_logits.get(), d_t.get(), dloss, n, v, nullptr);
  std::vector<float> loss(n), mx(n), sum(n), dlogits(logits.size(), 0.0f), dl(n, dloss);
  cpu::cross_entropy_forward(loss.data(), logits.data(), targets.data(), n, v);
  cpu::cross_entropy_row_max(mx.data(), logits.data(), n, v);
  cpu::cross_entropy_row_sumexp(sum.data(), logits.data(), mx.data(), n, v);
  cpu::cross_entropy_backward(dlogits.data(), logits.data(), mx.data(), sum.data(), targets.data(), dl.data(), n, v,
                              0);
  CHECK(mismatches("fused loss", d_loss.download(), loss, 1e-4f, 1e-5f) == 0);
  CHECK(mismatches("fused dlogits", d_logits.download(), dlogits, 1e-9f, eps_of<T>() + 3e-4f) == 0);
}
