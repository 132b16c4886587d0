#pragma once
// qgZ's hierarchical gradient reduction across nodes (ZeRO++, Wang et al. 2023,
// §3.3 and Fig. 6; DeepSpeed all_to_all_quant_reduce): each rank's gradients
// cross the node in int4, are summed there, and the node's partial sums cross
// to the other nodes in int4 again before the final sum. As a reduce-scatter:
// dp rank r = n·g + l (node n of k, local index l of g) ends with piece r of
// Σ over ranks, where
//   chunk l of a rank's bucket = its pieces l, g + l, 2g + l, … (the pieces the
//       local ranks l of every node own), so the intra-node reduce-scatter hands
//       local rank l its node's partial of them;
//   contributions are quantize-dequantized (kernels/quantize.hpp) before the
//       intra-node step, partials before the inter-node step.
// Synchronous. `bucket` holds g·k·piece floats and is left permuted and quantized.
#include <cstddef>

#include "ztune/executor/backend.hpp"
#include "ztune/executor/communicator.hpp"

namespace ztune::executor {

void hierarchical_quantized_reduce_scatter(Backend& be, Communicator& intra, Communicator& inter, float* bucket,
                                           float* out, std::size_t piece, int bits, long group);

}  // namespace ztune::executor
