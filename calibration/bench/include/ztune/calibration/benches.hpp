#pragma once
// The calibration microbenchmarks. Each runs on every rank at once (so ranks
// contend for the machine as they do in training), times with protocol.hpp's
// protocol, checks its result against a closed-form answer after timing, prints
// its nccl-tests-style table on rank 0 (`out`, null elsewhere), and returns its
// rows as JSON (schema "ztune.measurements/1", see measurements.hpp). `wrong`
// accumulates the elements that failed the data check, summed over ranks.
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ztune/calibration/group_layouts.hpp"
#include "ztune/calibration/protocol.hpp"
#include "ztune/executor/backend.hpp"
#include "ztune/executor/communicator.hpp"

namespace ztune::calibration {

struct BenchContext {
  executor::Communicator& world;
  executor::Backend& backend;
  Protocol protocol;
  std::FILE* out = nullptr;   // rank 0's table stream; nullptr on the other ranks
  std::int64_t wrong = 0;     // elements that failed a data check, all ranks, all benches
};

/// Every collective of collective_test.hpp on every layout, message sizes
/// doubling from min_bytes to max_bytes (nccl-tests' -b/-e/-f 2).
nlohmann::json bench_collectives(BenchContext& ctx, std::span<GroupLayout> layouts, std::size_t min_bytes,
                                 std::size_t max_bytes, const std::vector<std::string>& only);

/// GEMM shape sweep (square and transformer-shaped, with transposes) through Backend::gemm.
nlohmann::json bench_gemm(BenchContext& ctx, int max_dim);

/// The attention core (QKᵀ, causal softmax, PV) through Backend::attention_forward.
nlohmann::json bench_attention(BenchContext& ctx);

/// Memory-bound kernels (copy, add, scale, GeLU, LayerNorm, device AdamW) over
/// array sizes doubling (×4) from 64 KiB to max_bytes per array.
nlohmann::json bench_memory_bound(BenchContext& ctx, std::size_t max_bytes);

/// Host↔device copies (Backend::to_host / from_host between a device buffer
/// and a host_staging buffer: pinned host memory on CUDA, plain memcpy on CPU).
nlohmann::json bench_copies(BenchContext& ctx, std::size_t max_bytes);

/// The offload path's host AdamW (ZeRO-Offload's CPU Adam) on `threads`
/// threads per rank, all ranks at once: parameters per second per rank and per node.
nlohmann::json bench_host_adam(BenchContext& ctx, int threads, int ranks_per_node);

}  // namespace ztune::calibration
