// The profile fit against known answers: measurements synthesised in closed
// form from chosen hardware figures (written out here, not computed by
// op_costs), with and without outliers, must give those figures back; a
// measurements file with a typo is refused with its JSON path; the run fit
// recovers a known profile's predictions on plans it did not see.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "ztune/vocab/catalog.hpp"
#include "ztune/model/cpu_executor_costs.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/model/op_costs.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/calibration/profile_fit.hpp"

using namespace ztune;

namespace {

// A machine with these figures (per rank): GEMM efficiency 0.25 at ≤1e6 FLOPs
// rising log-linearly to 0.75 at ≥1e9 of a 50 GFLOP/s peak; copy 40 GB/s;
// training kernels 10 GB/s of work (cpu_executor_costs' count) + 2 µs per
// call; collectives 8 µs per call + 3 µs per step + S·busfactor / 6 GB/s;
// memcpy 12 GB/s; Adam 0.3 Gparams/s per node.
constexpr double kPeak = 50e9, kCopy = 40e9, kKernels = 10e9, kLaunch = 2e-6;
constexpr double kBase = 8e-6, kAlpha = 3e-6, kBusbw = 6e9, kMemcpy = 12e9;

double true_gemm_eff(double flops) {
  const double x = std::clamp((std::log10(flops) - 6.0) / 3.0, 0.0, 1.0);
  return 0.25 + 0.5 * x;
}

Measurements synthetic(bool outliers) {
  Measurements m;
  m.backend = "cpu";
  m.ranks = 2;
  m.ranks_per_node = 2;
  int i = 0;
  auto noisy = [&](double t) { return outliers && (++i % 9 == 0) ? 10.0 * t : t; };
  // Six shapes per octave of size: the real sweep's density per table row.
  for (double d = 32; d <= 2048; d *= std::pow(2.0, 1.0 / 6)) {
    const double f = 2 * d * d * d;
    m.gemm.push_back({d, d, d, f, noisy(f / (kPeak * true_gemm_eff(f)))});
  }
  for (double n = 16384; n <= 16.0 * 1048576; n *= 4) {
    m.memory.push_back({"copy", 8 * n, 1, noisy(8 * n / kCopy + kLaunch)});
    // On CPU ranks the kernels' rate applies to their work as the time model
    // counts it (GeLU's tanh costs 31/8 of its traffic): the machine runs
    // that work at kKernels, whatever each kernel's traffic.
    for (const auto& [k, bytes] : {std::pair{"add", 12.0}, std::pair{"gelu_forward", 8.0},
                                   std::pair{"layernorm_forward", 8.0}}) {
      const double work = bytes * n * cpu_benchmark_work_per_byte(k).value();
      m.memory.push_back({k, bytes * n, 1, noisy(work / kKernels + kLaunch)});
    }
    m.copies.push_back({"h2d", 4 * n, noisy(4 * n / kMemcpy)});
  }
  m.host_adam_node_params_per_s = 0.3e9;
  const std::pair<const char*, Collective> kinds[] = {{"all_reduce", Collective::all_reduce},
                                                      {"all_gather", Collective::all_gather},
                                                      {"sendrecv", Collective::send}};
  for (int n : {2, 4}) {
    for (const auto& [name, kind] : kinds) {
      for (double s = 1024; s <= 16.0 * 1048576; s *= 2) {
        // Latency steps of MPI's collectives on CPU ranks (op_costs
        // latency_steps): all-reduce min(ring 2(n−1), recursive doubling
        // 2⌈log2 n⌉), 2 for n = 2 and 4 for n = 4; all-gather n−1; a send 1.
        const double ar_steps = std::min(2.0 * (n - 1), 2.0 * std::ceil(std::log2(n)));
        const double st = kind == Collective::all_reduce ? ar_steps : kind == Collective::send ? 1.0 : n - 1.0;
        const double factor = kind == Collective::all_reduce ? 2.0 * (n - 1) / n
                              : kind == Collective::send      ? 1.0
                                                             : (n - 1.0) / n;
        CollectiveSample c;
        c.kind = kind;
        c.name = name;
        c.group = "intra:" + std::to_string(n);
        c.ranks = n;
        c.per_node = n;
        c.bytes = s;
        c.time_s = noisy(kBase + kAlpha * st + s * factor / kBusbw);
        m.collectives.push_back(c);
      }
    }
  }
  return m;
}

// The same machine measured with multiplicative noise: each time × e^(σ·z),
// z standard normal from a fixed seed (so the test is deterministic), each
// point's spread set to σ (what the worker would report of such rounds).
Measurements noisy(double sigma, unsigned seed) {
  Measurements m = synthetic(false);
  std::mt19937 rng(seed);
  std::normal_distribution<double> z(0.0, 1.0);
  auto jitter = [&](double& t, double& spread) {
    t *= std::exp(sigma * z(rng));
    spread = sigma;
  };
  for (auto& s : m.gemm) jitter(s.time_s, s.spread);
  for (auto& s : m.memory) jitter(s.time_s, s.spread);
  for (auto& s : m.copies) jitter(s.time_s, s.spread);
  for (auto& s : m.collectives) jitter(s.time_s, s.spread);
  return m;
}

// The figures of the synthetic machine the fit must give back, each with its
// relative error against the known value.
void check_recovered(const ProfileFit& fit, double tol) {
  const double peak = fit.cluster.node.gpu.peak_flops(Precision::fp32);
  for (double f : {1e6, 1e7, 1e8, 1e9}) {
    INFO("GEMM rate at " << f << " FLOPs");
    CHECK(peak * fit.profile.gemm_efficiency_at(f) == Approx(kPeak * true_gemm_eff(f)).epsilon(tol));
  }
  CHECK(fit.cluster.node.gpu.hbm_bandwidth_gbps * fit.profile.memory_bandwidth_efficiency ==
        Approx(kKernels / 1e9).epsilon(tol));
  CHECK(fit.cluster.node.gpu.hbm_bandwidth_gbps == Approx(kCopy / 1e9).epsilon(tol));
  CHECK(fit.cluster.node.pcie_bandwidth_gbps == Approx(kMemcpy / 1e9).epsilon(tol));
  CHECK(fit.cluster.intra_node.bandwidth_gbps * fit.profile.intra_node.busbw_efficiency ==
        Approx(kBusbw / 1e9).epsilon(tol));
}

// The catalog profile of the cluster's GPU with a flat GEMM table: a prior
// that is wrong (the same efficiency at every size) and independent of the
// shipped fit, which the samples must overrule.
HardwareProfile flat_gemm_prior(const Cluster& c, double efficiency) {
  HardwareProfile p = default_profile_for(c);
  p.gemm_efficiency = {{1e14, efficiency}, {1e6, efficiency}};
  return p;
}

}  // namespace

TEST_CASE("with 3% timing noise the fit recovers the machine within 5%", "[calibration][noise]") {
  const Cluster c = load_cluster("local-cpu");
  for (unsigned seed : {1U, 2U, 3U}) {
    INFO("seed " << seed);
    const ProfileFit fit = fit_profile(noisy(0.03, seed), c, default_profile_for(c), "test");
    check_recovered(fit, 0.05);
    CHECK(fit.dropped.empty());
    CHECK(fit.median_spread == Approx(0.03));
  }
}

TEST_CASE("one point 100x off: the fit stays within 5% and names it", "[calibration][noise]") {
  const Cluster c = load_cluster("local-cpu");
  Measurements m = noisy(0.03, 7);
  // The 20th GEMM (a descheduled call) and one collective, each 100× slow.
  REQUIRE(m.gemm.size() > 20);
  m.gemm[20].time_s *= 100;
  const std::string shape = std::to_string(std::lround(m.gemm[20].m));
  const ProfileFit fit = fit_profile(m, c, default_profile_for(c), "test");
  check_recovered(fit, 0.05);
  bool named = false;
  for (const auto& o : fit.outliers) named = named || (o.find("gemm " + shape + "x") == 0 && o.find("slower") != std::string::npos);
  INFO("outliers named: " << fit.outliers.size() << (fit.outliers.empty() ? "" : ", first: " + fit.outliers.front()));
  CHECK(named);
  CHECK(fit.outliers.size() <= 3);  // the noise itself is not called outliers
}

TEST_CASE("points whose rounds spread too wide are left out and named", "[calibration][noise]") {
  const Cluster c = load_cluster("local-cpu");
  Measurements m = noisy(0.02, 3);
  m.memory[2].spread = 0.6;
  m.memory[2].repeats = 15;
  m.memory[2].time_s *= 3;  // what a busy machine does to such a point
  const ProfileFit fit = fit_profile(m, c, default_profile_for(c), "test");
  REQUIRE(fit.dropped.size() == 1);
  CHECK_THAT(fit.dropped[0], Catch::StartsWith("memory-bound " + m.memory[2].kernel) && Catch::Contains("60%"));
  CHECK(fit.points == static_cast<int>(m.gemm.size() + m.memory.size() + m.copies.size() + m.collectives.size()));
  check_recovered(fit, 0.05);
}

// A busy machine's GEMM sweep (issue 21: 1e-6 at 1e9 FLOPs, 0.28 at 1e8, 0.047
// at 1e7, 0.35 at 1e6): the largest GEMMs descheduled. The table stays
// physical: every efficiency in (0, 1], non-decreasing with size.
TEST_CASE("the GEMM table is physical: efficiencies above 0 and at most 1, non-decreasing in size", "[calibration][physical]") {
  const Cluster c = load_cluster("local-cpu");
  Measurements m = synthetic(false);
  for (auto& s : m.gemm) {
    if (s.flops > 3e8) s.time_s *= 40;       // the big ones descheduled
    else if (s.flops > 5e6 && s.flops < 3e7) s.time_s *= 6;
  }
  const ProfileFit fit = fit_profile(m, c, default_profile_for(c), "test");
  const auto& t = fit.profile.gemm_efficiency;  // sizes descending
  REQUIRE(t.size() >= 2);
  for (std::size_t i = 0; i < t.size(); ++i) {
    INFO("row " << t[i].size);
    CHECK(t[i].efficiency > 0);
    CHECK(t[i].efficiency <= 1);
    if (i > 0) CHECK(t[i - 1].efficiency >= t[i].efficiency);
  }
  CHECK_NOTHROW(profile_from_json(profile_to_json(fit.profile), "fitted.json"));
}

// On a GPU the datasheet bounds the rates: collectives measured above the
// link's figure give an efficiency of 1, never a faster link.
TEST_CASE("a GPU's fitted rates never exceed its datasheet", "[calibration][physical]") {
  const Cluster c = load_cluster("dgx-a100-80gb");
  Measurements m;
  m.backend = "cuda";
  m.gemm_precision = Precision::bf16;
  const double link = c.intra_node.bandwidth_gbps * 1e9;
  for (double s = 1 << 20; s <= 1 << 30; s *= 2) {
    CollectiveSample x;
    x.kind = Collective::all_reduce;
    x.name = "all_reduce";
    x.group = "intra:8";
    x.ranks = 8;
    x.per_node = 8;
    x.bytes = s;
    x.time_s = 10e-6 + s * bus_factor(Collective::all_reduce, 8) / (1.5 * link);  // 1.5× the datasheet
    m.collectives.push_back(x);
  }
  const ProfileFit fit = fit_profile(m, c, default_profile_for(c), "test");
  CHECK(fit.profile.intra_node.busbw_efficiency == 1.0);
  CHECK(fit.cluster.intra_node.bandwidth_gbps == c.intra_node.bandwidth_gbps);
  CHECK(fit.profile.intra_node.base_latency_s >= 0);
  CHECK(fit.profile.intra_node.latency_s >= 0);
}

// A section measured at one size only cannot separate bandwidth from the
// launch time: what the data do not determine stays at the prior and is
// reported as such.
TEST_CASE("a parameter the data do not determine stays at its prior, reported so", "[calibration][prior]") {
  const Cluster c = load_cluster("local-cpu");
  const HardwareProfile prior = default_profile_for(c);
  Measurements m;
  m.backend = "cpu";
  for (int i = 0; i < 6; ++i) m.memory.push_back({"add", 12.0 * 1048576, 1, 12.0 * 1048576 / kKernels});
  const ProfileFit fit = fit_profile(m, c, prior, "test");
  bool launch_reported = false;
  for (const auto& v : fit.values)
    if (v.name == "kernel launch") {
      launch_reported = true;
      CHECK_FALSE(v.determined);
      CHECK(v.after == Approx(v.before));
    }
  CHECK(launch_reported);
  CHECK(fit.profile.kernel_launch_s == Approx(prior.kernel_launch_s));
  // Sections with no samples keep the prior entirely.
  CHECK(fit.profile.attention_gemm_factor == prior.attention_gemm_factor);
  CHECK(fit.profile.gemm_efficiency.size() == prior.gemm_efficiency.size());
}

TEST_CASE("the microbenchmark fit recovers the figures the measurements were made from", "[calibration]") {
  for (bool outliers : {false, true}) {
    INFO("outliers (every 9th point ×10): " << outliers);
    const Cluster c = load_cluster("local-cpu");
    const HardwareProfile prior = default_profile_for(c);
    const ProfileFit fit = fit_profile(synthetic(outliers), c, prior, "test");
    // Noise-free data: the prior (the shipped profile) pulls the fit by under
    // 0.1 % (a regularised fit is biased by design, by the prior's weight
    // against the data's: 2 % timing noise assumed over dozens of points).
    const double tol = outliers ? 0.03 : 1e-3;
    // GEMM: the best rate becomes the peak; the table reproduces the curve.
    const double peak = fit.cluster.node.gpu.peak_flops(Precision::fp32);
    CHECK(peak == Approx(kPeak * 0.75).epsilon(tol));
    for (double f : {1e6, 1e7, 1e8, 1e9})
      CHECK(peak * fit.profile.gemm_efficiency_at(f) == Approx(kPeak * true_gemm_eff(f)).epsilon(tol));
    // Memory: copy is the figure, the kernels its fraction, plus the launch time.
    CHECK(fit.cluster.node.gpu.hbm_bandwidth_gbps == Approx(kCopy / 1e9).epsilon(tol));
    CHECK(fit.profile.memory_bandwidth_efficiency == Approx(kKernels / kCopy).epsilon(tol));
    // The launch time is a few % of these kernels' time: the prior's pull on
    // it is larger (≤ 2 %).
    CHECK(fit.profile.kernel_launch_s == Approx(kLaunch).epsilon(outliers ? 0.1 : 2e-2));
    CHECK(fit.cluster.node.pcie_bandwidth_gbps == Approx(kMemcpy / 1e9).epsilon(tol));
    CHECK(fit.cluster.node.cpu_adam_gparams_per_s == Approx(0.3));
    // Collectives: α per step (cluster latency on a CPU cluster), base per call, busbw.
    CHECK(fit.cluster.intra_node.bandwidth_gbps * fit.profile.intra_node.busbw_efficiency ==
          Approx(kBusbw / 1e9).epsilon(tol));
    CHECK(fit.cluster.intra_node.latency_us * 1e-6 + fit.profile.intra_node.latency_s ==
          Approx(kAlpha).epsilon(outliers ? 0.1 : 1e-3));
    CHECK(fit.profile.intra_node.base_latency_s == Approx(kBase).epsilon(outliers ? 0.1 : 1e-3));
    // The written profile loads back (every fraction in range, table descending).
    CHECK_NOTHROW(profile_from_json(profile_to_json(fit.profile), "fitted.json"));
    // Per collective and layout: busbw as generated.
    for (const auto& cf : fit.collectives) CHECK(cf.busbw_gbps == Approx(kBusbw / 1e9).epsilon(outliers ? 0.05 : 1e-4));
  }
}

TEST_CASE("a measurements file with an unknown field is refused with its path", "[calibration]") {
  nlohmann::json doc{{"schema", "ztune.measurements/1"}, {"backend", "cpu"}, {"ranks", 2}, {"nodes", 1},
                     {"ranks_per_node", 2}, {"threads_per_rank", 1}, {"protocol", nlohmann::json::object()},
                     {"environment", nlohmann::json::object()}, {"wrong", 0}, {"elapsed_s", 1.0},
                     {"notes", nlohmann::json::array()}, {"attention", nlohmann::json::array()},
                     {"memory_bound", nlohmann::json::array()}, {"copies", nlohmann::json::array()},
                     {"host_adam", nullptr}, {"collectives", nlohmann::json::array()}};
  doc["gemm"] = nlohmann::json::array({{{"m", 8}, {"n", 8}, {"k", 8}, {"op", "NN"}, {"flops", 1024}, {"time_s", 1e-6},
                                        {"time_min_s", 1e-6}, {"time_max_s", 1e-6}, {"iters", 1}, {"repeats", 1},
                                        {"gflops", 1.0}, {"wrong", 0}, {"tflops", 1}}});
  try {
    (void)measurements_from_json(doc, "m.json");
    FAIL("accepted an unknown field");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("m.json") && Catch::Contains("$.gemm[0].tflops"));
  }
  doc["gemm"][0].erase("tflops");
  CHECK(measurements_from_json(doc, "m.json").gemm.size() == 1);
  // Numbers past any machine (a timed round of 1e300 s) made the fit NaN: refused where they stand.
  doc["gemm"][0]["time_s"] = 1e300;
  CHECK_THROWS_WITH(measurements_from_json(doc, "m.json"),
                    Catch::Contains("$.gemm[0].time_s: expected a number > 0 and at most 1e+06"));
  doc["gemm"][0]["time_s"] = 1e-6;
  // The GEMM precision: fp32 on the CPU backend; a CUDA run names its operands'.
  CHECK(measurements_from_json(doc, "m.json").gemm_precision == Precision::fp32);
  doc["gemm_precision"] = "bf16";
  CHECK_THROWS_WITH(measurements_from_json(doc, "m.json"),
                    Catch::Contains("$.gemm_precision") && Catch::Contains("fp32 GEMMs only"));
  doc["backend"] = "cuda";
  CHECK(measurements_from_json(doc, "m.json").gemm_precision == Precision::bf16);
  doc["gemm_precision"] = "tf32";
  CHECK_THROWS_WITH(measurements_from_json(doc, "m.json"), Catch::Contains("$.gemm_precision"));
  doc["gemm_precision"] = "bf16";
  // A collective row names a kind the worker benchmarks, by its run-record name
  // or nccl-tests' "sendrecv"; the point-to-point ends by their own names, or
  // a kind it does not run, are refused at the row's "collective".
  for (const char* name : {"send", "recv", "all_to_all", "barrier", "p2p"}) {
    doc["collectives"] = nlohmann::json::array({{{"collective", name}}});
    CHECK_THROWS_WITH(measurements_from_json(doc, "m.json"),
                      Catch::Contains("$.collectives[0].collective") && Catch::Contains("or sendrecv"));
  }
  for (const char* name : {"sendrecv", "all_reduce", "broadcast"}) {
    doc["collectives"] = nlohmann::json::array({{{"collective", name}}});
    CHECK_THROWS_WITH(measurements_from_json(doc, "m.json"), Catch::Contains("$.collectives[0].group"));
  }
  doc["collectives"] = nlohmann::json::array();
  doc["schema"] = "ztune.measurements/2";
  CHECK_THROWS_WITH(measurements_from_json(doc, "m.json"), Catch::Contains("$.schema"));
}

// bf16 GEMMs on a GPU (calibrate --backend cuda) are efficiencies of the
// cluster's bf16 tensor-core peak: samples made at 70 % of an A100's 312
// TFLOP/s fit a table of 0.7, and the fp32 peak figure is left alone.
TEST_CASE("GPU GEMM samples fit against the peak of their precision", "[calibration]") {
  const Cluster c = load_cluster("dgx-a100-80gb");
  Measurements m;
  m.backend = "cuda";
  m.gemm_precision = Precision::bf16;
  const double peak = c.node.gpu.peak_flops(Precision::bf16);
  REQUIRE(peak == Approx(312e12));
  for (double f = 1e9; f <= 1e13; f *= 3) m.gemm.push_back({0, 0, 0, f, f / (0.7 * peak)});
  const ProfileFit fit = fit_profile(m, c, flat_gemm_prior(c, 0.5), "test");
  for (double f : {1e10, 1e11, 1e12}) CHECK(fit.profile.gemm_efficiency_at(f) == Approx(0.7).epsilon(1e-3));
  CHECK(fit.cluster.node.gpu.peak_tflops_fp32 == c.node.gpu.peak_tflops_fp32);
  CHECK(fit.cluster.node.gpu.peak_tflops_bf16 == c.node.gpu.peak_tflops_bf16);
}

// The same at real shapes: each square GEMM ran at 0.7 of the peak times the
// share of its waves its 128×128 tiles filled on the A100's 108 SMs, counted
// here by hand; the fit divides the waves out and gives back the full-wave 0.7.
TEST_CASE("GPU GEMM samples: the waves are divided out of the fitted table", "[calibration][gemm]") {
  const Cluster c = load_cluster("dgx-a100-80gb");
  const HardwareProfile prior = flat_gemm_prior(c, 0.5);
  REQUIRE(prior.gemm_waves.units() == 108);
  Measurements m;
  m.backend = "cuda";
  m.gemm_precision = Precision::bf16;
  const double peak = c.node.gpu.peak_flops(Precision::bf16);
  // d: tiles (d/128)², waves of 108: 1024 → 64 in 1, 1536 → 144 in 2, 2048 → 256 in 3,
  // 4096 → 1024 in 10, 8192 → 4096 in 38.
  const std::pair<double, double> used[] = {{1024, 64.0 / 108},   {1536, 144.0 / 216}, {2048, 256.0 / 324},
                                            {4096, 1024.0 / 1080}, {8192, 4096.0 / 4104}};
  for (const auto& [d, share] : used) {
    const double f = 2 * d * d * d;
    m.gemm.push_back({d, d, d, f, f / (0.7 * share * peak)});
  }
  const ProfileFit fit = fit_profile(m, c, prior, "test");
  // Within 0.5 % (the prior's pull on five samples) at the rows samples lie on
  // both sides of (1e12 leans on the 1e13 row no sample reaches); undivided, the
  // 1024³ sample would read 0.7 · 64/108 = 0.41.
  for (double f : {1e10, 1e11}) CHECK(fit.profile.gemm_efficiency_at(f) == Approx(0.7).epsilon(5e-3));
  // And the fitted profile prices each sample's shape back at its measured time
  // (those between two determined rows: 8192³ leans on the 1e13 row, which no
  // sample brackets and the prior holds).
  for (const auto& s : m.gemm) {
    if (s.flops > 1e12) continue;
    INFO(s.m << "^3");
    CHECK(s.flops / (peak * fit.profile.gemm_efficiency_of(s.m, s.n, s.k)) == Approx(s.time_s).epsilon(5e-3));
  }
}

TEST_CASE("the run fit recovers a known profile's iteration times on plans it did not see", "[calibration]") {
  // Truth: the catalog CPU profile on local-cpu with slower GEMMs, faster
  // memory-bound kernels and no framework overheads; the fit starts from the
  // catalog profile and sees only the truth's iteration times of five plans.
  const Cluster c = load_cluster("local-cpu");
  const Transformer m = load_transformer("tiny");
  const HardwareProfile start = default_profile_for(c);
  HardwareProfile truth = start;
  for (auto& row : truth.gemm_efficiency) row.efficiency *= 0.4;
  truth.memory_bandwidth_efficiency = 0.95;
  truth.engine.microbatch_overhead_s = 3e-3;
  truth.engine.step_overhead_s = 1e-3;
  truth.engine.host_op_s = 0;
  auto plan = [&](int dp, int tp, int pp, int mb, int ga, Recompute r) {
    Plan p;
    p.dp = dp;
    p.tp = tp;
    p.pp = pp;
    p.micro_batch = mb;
    p.grad_accum = ga;
    p.global_batch = static_cast<std::int64_t>(mb) * ga * dp;
    p.recompute = r;
    p.precision = Precision::fp32;
    return p;
  };
  auto observe = [&](const Plan& p) {
    RunObservation o;
    o.label = p.summary();
    o.model = m;
    o.plan = p;
    o.measured_iteration_s = predict_time(m, p, c, truth).iteration_s;
    return o;
  };
  const std::vector<RunObservation> seen{observe(plan(2, 1, 1, 2, 4, Recompute::none)),
                                         observe(plan(1, 2, 1, 4, 4, Recompute::none)),
                                         observe(plan(1, 1, 2, 2, 8, Recompute::none)),
                                         observe(plan(2, 1, 1, 8, 1, Recompute::full)),
                                         observe(plan(2, 1, 1, 1, 8, Recompute::none))};
  const std::vector<RunObservation> unseen{observe(plan(2, 1, 1, 4, 2, Recompute::selective)),
                                           observe(plan(1, 2, 1, 2, 8, Recompute::none)),
                                           observe(plan(1, 1, 2, 4, 4, Recompute::full))};
  const double before = mean_abs_error(prediction_errors(unseen, c, start));
  const RunFit fit = fit_profile_to_runs(seen, c, start, RunFitOptions{});
  const double after = mean_abs_error(prediction_errors(unseen, fit.cluster, fit.profile));
  INFO("held-out mean |error| before " << before << ", after " << after);
  CHECK(before > 0.3);
  CHECK(after < 0.05);
  CHECK(fit.mean_abs_error_after < fit.mean_abs_error_before);
  CHECK_NOTHROW(profile_from_json(profile_to_json(fit.profile), "fitted.json"));
}

// A fitted profile is self-sufficient: the figures measured in place of the
// cluster's (the synthetic machine's peak, copy and memcpy bandwidth, collective
// latency, host Adam rate) travel in its "measured" section, so the catalog
// cluster plus `--profile` alone is the calibrated machine.
TEST_CASE("a fitted profile carries the figures it measured", "[calibration][fit]") {
  const Cluster c = load_cluster("local-cpu");
  const ProfileFit fit = fit_profile(synthetic(false), c, default_profile_for(c), "test");
  HardwareProfile p = fit.profile;
  p.measured = measured_figures(c, fit.cluster, {});
  p.measured.intra_node.fitted = true;
  const HardwareProfile loaded = profile_from_json(profile_to_json(p), "fitted.json");
  REQUIRE_FALSE(loaded.measured.empty());
  CHECK(loaded.measured.cluster == "local-cpu");
  const Cluster applied = with_measured_figures(c, loaded);
  CHECK(applied.node.cpu_adam_gparams_per_s == Approx(0.3));
  CHECK(applied.node.gpu.peak_flops(Precision::fp32) == Approx(kPeak * 0.75).epsilon(1e-3));
  CHECK(applied.node.gpu.hbm_bandwidth_gbps == Approx(kCopy / 1e9).epsilon(1e-3));
  CHECK(applied.node.pcie_bandwidth_gbps == Approx(kMemcpy / 1e9).epsilon(1e-3));
  CHECK(applied.intra_node.latency_us * 1e-6 + loaded.intra_node.latency_s == Approx(kAlpha).epsilon(1e-3));
  CHECK_FALSE(applied.intra_node.collective_efficiency.has_value());
  // Figures it did not measure stay the cluster's.
  CHECK(applied.node.nvme_bandwidth_gbps == c.node.nvme_bandwidth_gbps);
  CHECK(applied.inter_node.bandwidth_gbps == c.inter_node.bandwidth_gbps);
  // A catalog profile measures nothing and changes nothing.
  CHECK(default_profile_for(c).measured.empty());
  CHECK(cluster_to_json(with_measured_figures(c, default_profile_for(c))) == cluster_to_json(c));
}

TEST_CASE("a profile's measured section is read strictly", "[calibration][fit][input]") {
  const Cluster c = load_cluster("local-cpu");
  nlohmann::json doc = profile_to_json(default_profile_for(c));
  doc["measured"] = {{"cluster", "local-cpu"}, {"cpu_adam_gparams_per_s", -1}};
  try {
    (void)profile_from_json(doc, "bad-profile.json");
    FAIL("a negative host Adam rate was accepted");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("bad-profile.json") && Catch::Contains("measured") &&
                             Catch::Contains("cpu_adam_gparams_per_s"));
  }
  doc["measured"] = {{"cluster", "local-cpu"}, {"intra_node", {{"fitted", true}, {"bandwdth_gbps", 3}}}};
  CHECK_THROWS_WITH(profile_from_json(doc, "bad-profile.json"), Catch::Contains("bandwdth_gbps"));
}

// A CPU rank's memory-bound sample is priced as the time model prices the CPU
// executor's kernels: GeLU's tanh bounds it (31 equivalent bytes per element,
// cpu_executor_costs.cpp: 7.5 ns at 4.12 GB/s), not its 8 bytes of traffic;
// on a GPU the traffic is the price. A kernel the CPU model does not count is
// neither fitted nor judged.
TEST_CASE("memory-bound samples are priced as the time model counts them", "[calibration]") {
  const MemorySample gelu{"gelu_forward", 8.0 * 1024, 1, 1e-3, 0, 5};
  CHECK(memory_work_bytes(gelu, DeviceKind::cpu).value() == Approx(31.0 * 1024));
  CHECK(memory_work_bytes(gelu, DeviceKind::gpu).value() == Approx(8.0 * 1024));
  const MemorySample copy{"copy", 8.0 * 1024, 1, 1e-3, 0, 5};
  CHECK(memory_work_bytes(copy, DeviceKind::cpu).value() == Approx(8.0 * 1024));
  CHECK_FALSE(memory_work_bytes({"softmax_forward", 8.0 * 1024, 1, 1e-3, 0, 5}, DeviceKind::cpu).has_value());
  // Copies: the ≥ 1 MiB ones when there are any, else all.
  const std::vector<CopySample> copies{{"h2d", 65536, 1e-5}, {"h2d", 4194304, 1e-3}, {"d2h", 1048576, 1e-4}};
  CHECK(copies_in_fit(copies) == std::vector<std::size_t>{1, 2});
  CHECK(copies_in_fit({copies[0]}) == std::vector<std::size_t>{0});
}
