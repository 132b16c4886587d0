// Kernel benchmark: each CUDA kernel at GPT-3 XL (1.3B) shapes in bf16 — 8 × 1024
// tokens, C = 2048, 16 heads, V = 50304 — timed with CUDA events (20 launches after
// 3 warm-up ones), reported as achieved GB/s (memory-bound kernels: bytes read +
// written once, as counted in the comment of each line) or TFLOP/s (GEMMs and
// attention: 2·M·N·K per GEMM; causal attention counts the full square, as the
// MFU convention does), each against the ceiling measured first: device-to-device
// copy bandwidth (2 × bytes / time) and a 8192³ bf16 cuBLASLt GEMM.
// Correctness is the tests' job (tests/gpu); this only measures.
#include <cuda_bf16.h>

#include <cstdio>
#include <string>

#include "bench_common.hpp"
#include "ztune/kernels/cuda/gelu.hpp"
#include "ztune/kernels/cuda/swiglu.hpp"
#include "ztune/kernels/cuda/adamw.hpp"
#include "ztune/kernels/cuda/attention.hpp"
#include "ztune/kernels/cuda/cross_entropy.hpp"
#include "ztune/kernels/cuda/elementwise.hpp"
#include "ztune/kernels/cuda/embedding.hpp"
#include "ztune/kernels/cuda/gemm.hpp"
#include "ztune/kernels/cuda/layernorm.hpp"
#include "ztune/kernels/layernorm.hpp"

using namespace ztune;
using bf16 = __nv_bfloat16;
namespace kc = ztune::kernels::cuda;

namespace {

struct Ceilings {
  double copy_gbps = 0;
  double gemm_tflops = 0;
};

void row(const char* name, double seconds, double bytes, double flops, const Ceilings& c) {
  if (flops > 0) {
    const double tf = flops / seconds / 1e12;
    std::printf("%-34s %10.1f us %10.1f TFLOP/s %6.1f%% of GEMM ceiling\n", name, seconds * 1e6, tf,
                100 * tf / c.gemm_tflops);
  } else {
    const double gb = bytes / seconds / 1e9;
    std::printf("%-34s %10.1f us %10.1f GB/s    %6.1f%% of copy ceiling\n", name, seconds * 1e6, gb,
                100 * gb / c.copy_gbps);
  }
}

}  // namespace

int main() {
  // Line by line into gpu-check.sh's pipe: a budget's SIGTERM keeps the rows already printed.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (!bench::require_device()) return 77;
  cudaStream_t s = nullptr;
  ZT_CUDA_CHECK(cudaStreamCreate(&s));
  kc::Gemm gemm;
  Ceilings ceil;
  {
    const std::size_t bytes = std::size_t{2} << 30;
    bench::Device<char> a(bytes), b(bytes);
    const double t = bench::time_per_call(s, [&] { ZT_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, s)); }, 10);
    ceil.copy_gbps = 2.0 * static_cast<double>(bytes) / t / 1e9;
    const int n = 8192;
    bench::Device<bf16> x(static_cast<std::size_t>(n) * n), y(static_cast<std::size_t>(n) * n),
        z(static_cast<std::size_t>(n) * n);
    const double tg = bench::time_per_call(s, [&] { gemm.run<bf16>({false, false, n, n, n, n, n, n}, 1.0f, x.get(), y.get(), 0.0f, z.get(), s); }, 10);
    ceil.gemm_tflops = 2.0 * n * n * n / tg / 1e12;
    std::printf("ceilings: copy %.0f GB/s (read + write), bf16 GEMM 8192^3 %.0f TFLOP/s\n\n", ceil.copy_gbps,
                ceil.gemm_tflops);
  }
  const int b = 8, t = 1024, c = 2048, nh = 16, v = 50304, n = b * t;
  const double nc = static_cast<double>(n) * c, e = sizeof(bf16);
  bench::Device<bf16> x(static_cast<std::size_t>(n) * c), y(x.size()), r(x.size()), dx(x.size());
  bench::Device<bf16> w(c), bias(4 * c), h4(static_cast<std::size_t>(n) * 4 * c), h4b(h4.size()), dh4(h4.size());
  bench::Device<float> mean(n), rstd(n), dw(c), db(4 * c);
  row("layernorm_forward", bench::time_per_call(s, [&] { kc::layernorm_forward<bf16>(y.get(), mean.get(), rstd.get(), x.get(), w.get(), bias.get(), n, c, ztune::kernels::cpu::kLayerNormEps, s); }),
      2 * nc * e, 0, ceil);  // read x, write y
  row("layernorm_backward", bench::time_per_call(s, [&] { kc::layernorm_backward<bf16>(dx.get(), dw.get(), db.get(), y.get(), x.get(), w.get(), mean.get(), rstd.get(), n, c, s); }),
      6 * nc * e, 0, ceil);  // dinp pass: read dout, x, dinp, write dinp; param pass: read dout, x
  row("rmsnorm_forward", bench::time_per_call(s, [&] { kc::rmsnorm_forward<bf16>(y.get(), rstd.get(), x.get(), w.get(), n, c, 1e-6f, s); }),
      2 * nc * e, 0, ceil);
  row("gelu_forward [N,4C]", bench::time_per_call(s, [&] { kc::gelu_forward<bf16>(h4b.get(), h4.get(), static_cast<long>(h4.size()), s); }),
      2 * 4 * nc * e, 0, ceil);
  row("gelu_backward [N,4C]", bench::time_per_call(s, [&] { kc::gelu_backward<bf16>(dh4.get(), h4.get(), h4b.get(), static_cast<long>(h4.size()), s); }),
      4 * 4 * nc * e, 0, ceil);  // read inp, dout, dinp; write dinp
  row("swiglu_forward [N,2·2C]→[N,2C]", bench::time_per_call(s, [&] { kc::swiglu_forward<bf16>(h4b.get(), h4.get(), n, 2 * c, s); }),
      (4 + 2) * nc * e, 0, ceil);
  row("bias_residual_forward", bench::time_per_call(s, [&] { kc::bias_residual_forward<bf16>(y.get(), x.get(), bias.get(), r.get(), n, c, s); }),
      3 * nc * e, 0, ceil);
  row("bias_backward [N,4C]", bench::time_per_call(s, [&] { kc::bias_backward<bf16>(db.get(), h4.get(), n, 4 * c, s); }),
      4 * nc * e, 0, ceil);
  {
    bench::Device<std::int32_t> ids(n);
    bench::Device<bf16> wte(static_cast<std::size_t>(v) * c);
    row("embedding_forward", bench::time_per_call(s, [&] { kc::embedding_forward<bf16>(y.get(), ids.get(), wte.get(), n, c, 0, v, s); }),
        2 * nc * e, 0, ceil);
    bench::Device<bf16> logits(static_cast<std::size_t>(n) * v);
    bench::Device<float> losses(n);
    row("cross_entropy fused [N,V] in place", bench::time_per_call(s, [&] { kc::ce_fused_forward_backward<bf16>(losses.get(), logits.get(), logits.get(), ids.get(), 1.0f / n, n, v, s); }),
        3.0 * n * v * e, 0, ceil);  // read twice (max, sum-exp), write once; the third read hits L2 only partly
    // The LM head GEMM [N,C]·[C,V]ᵀ.
    row("GEMM lm_head N×V×C", bench::time_per_call(s, [&] { gemm.run<bf16>({false, true, n, v, c, c, c, v}, 1.0f, y.get(), wte.get(), 0.0f, logits.get(), s); }, 10),
        0, 2.0 * n * v * c, ceil);
  }
  row("GEMM qkv N×3C×C (+bias)", bench::time_per_call(s, [&] { gemm.run<bf16>({false, false, n, 3 * c, c, c, 3 * c, 3 * c}, 1.0f, x.get(), h4.get(), 0.0f, h4b.get(), s, {kc::GemmEpilogue::bias, bias.get()}); }),
      0, 2.0 * n * 3 * c * c, ceil);
  row("GEMM fc N×4C×C (+bias+GELU)", bench::time_per_call(s, [&] { gemm.run<bf16>({false, false, n, 4 * c, c, c, 4 * c, 4 * c}, 1.0f, x.get(), h4.get(), 0.0f, h4b.get(), s, {kc::GemmEpilogue::gelu_bias, bias.get()}); }),
      0, 2.0 * n * 4 * c * c, ceil);
  {
    bench::Device<bf16> qkv(static_cast<std::size_t>(n) * 3 * c), dqkv(qkv.size()), out(x.size()), dout(x.size());
    bench::Device<float> lse(static_cast<std::size_t>(b) * nh * t), delta(lse.size());
    const double att_flops = 4.0 * b * nh * static_cast<double>(t) * t * (c / nh);  // QKᵀ and PV, full square
    row("flash_attention_forward", bench::time_per_call(s, [&] { kc::flash_attention_forward<bf16>(out.get(), lse.get(), qkv.get(), b, t, c, nh, s); }, 5),
        0, att_flops, ceil);
    row("flash_attention_backward", bench::time_per_call(s, [&] { kc::flash_attention_backward<bf16>(dqkv.get(), delta.get(), dout.get(), qkv.get(), out.get(), lse.get(), b, t, c, nh, s); }, 5),
        0, 2.5 * att_flops, ceil);  // FA-2's accounting: backward = 2.5 × forward
    bench::Device<bf16> att(static_cast<std::size_t>(b) * nh * t * t), ws(kc::attention_workspace_elems(b, t, c, nh));
    row("attention_forward (cuBLASLt, unfused)", bench::time_per_call(s, [&] { kc::attention_forward<bf16>(gemm, out.get(), att.get(), qkv.get(), ws.get(), b, t, c, nh, s); }, 5),
        0, att_flops, ceil);
    row("attention_backward (cuBLASLt, unfused)", bench::time_per_call(s, [&] { kc::attention_backward<bf16>(gemm, dqkv.get(), dout.get(), qkv.get(), att.get(), ws.get(), b, t, c, nh, s); }, 5),
        0, 2.0 * att_flops, ceil);
  }
  {
    const long p = 256L << 20;  // 268M parameters
    bench::Device<float> master(p), m(p), vv(p), g(p);
    bench::Device<bf16> param(p);
    const kc::AdamWTensor<float, bf16> tensor{master.get(), m.get(), vv.get(), g.get(), param.get(), p};
    row("adamw (fp32 master → bf16), 268M", bench::time_per_call(s, [&] { kc::adamw_multi_tensor<float, bf16>(&tensor, 1, {}, 1.0f, s); }, 10),
        static_cast<double>(p) * (4 * 4 + 3 * 4 + 2), 0, ceil);  // read master, m, v, g; write master, m, v, param
  }
  cudaStreamDestroy(s);
  return 0;
}
