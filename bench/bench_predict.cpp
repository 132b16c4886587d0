// bench_predict: time of one full analytical prediction (memory + time) per plan,
// the tuner's inner loop. Warms up, then times N back-to-back predictions over a
// rotating set of plans (so no result is reused), reports ns per plan. Setup
// (loading the model, cluster and profile) is outside the timed region. Then
// the same with a layer-cost memo, as the search's rank pass prices plans.
//
// usage: bench_predict [iterations]   (default 2,000,000)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/model/layer_cost_memo.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/vocab/transformer.hpp"

int main(int argc, char** argv) {
  using namespace ztune;
  const long iterations = argc > 1 ? std::atol(argv[1]) : 2'000'000;
  const Cluster cluster = load_cluster("dgx2x16");
  const Transformer model = load_transformer("100b");
  const HardwareProfile hw = default_profile_for(cluster);

  // A spread of valid plans: tp × pp × ZeRO stage × recompute × micro-batch.
  std::vector<Plan> plans;
  for (int tp : {1, 2, 4, 8, 16})
    for (int pp : {1, 5, 25})
      for (int zero : {0, 1, 2, 3})
        for (Recompute rc : {Recompute::none, Recompute::selective, Recompute::full})
          for (int mb : {1, 2, 4}) {
            Plan p;
            p.tp = tp;
            p.pp = pp;
            p.dp = cluster.total_devices() / (tp * pp);
            if (p.dp < 1) continue;
            p.zero_stage = zero;
            p.recompute = rc;
            p.micro_batch = mb;
            p.precision = Precision::fp16;
            p.grad_accum = 4;
            p.global_batch = static_cast<std::int64_t>(mb) * p.grad_accum * p.dp;
            p.sequence_parallel = tp > 1;
            if (check_plan(p, model, cluster)) continue;
            plans.push_back(p);
          }
  if (plans.empty()) {
    std::fprintf(stderr, "bench_predict: no valid plan\n");
    return 1;
  }
  double sink = 0;
  for (std::size_t i = 0; i < plans.size() * 100; ++i) {  // warm-up
    const Prediction pr = predict(model, plans[i % plans.size()], cluster, hw);
    sink += pr.time.iteration_s + pr.memory.gpu_total_bytes;
  }
  double timed_sink = 0;  // the timed loop's own sum, which the memo's loop must reproduce
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < iterations; ++i) {
    const Prediction pr = predict(model, plans[static_cast<std::size_t>(i) % plans.size()], cluster, hw);
    timed_sink += pr.time.iteration_s + pr.memory.gpu_total_bytes;
  }
  sink += timed_sink;
  const auto t1 = std::chrono::steady_clock::now();
  const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(iterations);
  std::printf("bench_predict: %zu distinct plans of %s on %s, %ld predictions (memory + time), one thread\n",
              plans.size(), model.name.c_str(), cluster.name.c_str(), iterations);
  std::printf("  %.0f ns per plan (%.2f µs), %.2f M plans/s   [checksum %.3g]\n", ns, ns / 1000, 1e3 / ns, sink);

  // The search's rank pass: the same predictions with one LayerCostMemo
  // (layer_cost_memo.hpp) shared by the plans, as a search worker holds it.
  LayerCostMemo memo(model, cluster, hw);
  double memo_sink = 0;
  const auto t2 = std::chrono::steady_clock::now();
  for (long i = 0; i < iterations; ++i) {
    const Plan& p = plans[static_cast<std::size_t>(i) % plans.size()];
    const MemoryPrediction mem = predict_memory(model, p, cluster, hw);
    memo_sink += predict_time(model, p, cluster, hw, &memo).iteration_s + mem.gpu_total_bytes;
  }
  const auto t3 = std::chrono::steady_clock::now();
  const double memo_ns = std::chrono::duration<double, std::nano>(t3 - t2).count() / static_cast<double>(iterations);
  std::printf("  with a layer-cost memo (%lld distinct layers): %.0f ns per plan (%.2f µs), %.2f M plans/s   "
              "[%s]\n",
              static_cast<long long>(memo.misses()), memo_ns, memo_ns / 1000, 1e3 / memo_ns,
              memo_sink == timed_sink ? "the same predictions" : "PREDICTIONS DIFFER");
  if (memo_sink != timed_sink) {
    std::fprintf(stderr, "bench_predict: the memo's predictions differ from the plain ones\n");
    return 1;
  }
  return 0;
}
