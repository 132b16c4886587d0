#pragma once
// The optimizer-offload path's Adam: AdamW on host memory, vectorised (Eigen array
// expressions compile to SIMD) and split over a thread pool, as DeepSpeed's CPU Adam
// (Ren et al. 2021, ZeRO-Offload §4.2). Same update as kernels::cpu::adamw_update,
// term for term, so offloaded and device runs agree.
#include <cstddef>

#include "ztune/kernels/adamw.hpp"
#include "ztune/kernels/thread_pool.hpp"

namespace ztune::executor {

void host_adamw(float* param, const float* grad, float* m, float* v, std::size_t n, const kernels::AdamWParams& h,
                kernels::ThreadPool& pool);

}  // namespace ztune::executor
