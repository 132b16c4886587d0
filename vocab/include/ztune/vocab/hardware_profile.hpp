#pragma once
// Hardware efficiency as data (STYLE.md #12; calculon's processor.py / network.py):
// GEMM efficiency by size, achieved bandwidth of memory-bound kernels, per-kernel
// launch overhead, α/β efficiency per fabric level, PCIe/NVMe efficiency. ONE
// profile per GPU type lives in data/profiles/<gpu>.json (schema
// "ztune.profile/1"); calibration writes fitted ones. The profile holds only
// fractions of the cluster's datasheet figures, so the same profile serves an
// A100-40GB and an A100-80GB node (their HBM and links come from the cluster).
//
// What the training framework does (host costs, fusion, overlap) is the
// engine profile's (engine_profile.hpp, data/engines/): a prediction uses the
// hardware profile with an engine attached (`engine`, with_engine()). A
// calibrated profile may carry "framework"/"overlap" sections: what ztune's
// own executor was measured to do on that hardware (`measured_engine`), which
// with_engine() uses in place of the catalog's ztune engine.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/engine_profile.hpp"

namespace ztune {

/// One row of a size-keyed efficiency table: at `size` (and above, up to the
/// next larger row) the efficiency is `efficiency`; between rows it is
/// interpolated linearly in log(size). Rows are stored with sizes descending.
struct EfficiencyPoint {
  double size = 0;        // the table's key (GEMM: FLOPs of one GEMM call)
  double efficiency = 0;  // fraction of peak in (0, 1]
};

/// How a GPU's GEMM kernels fill the device: tile and wave quantization
/// (NVIDIA Deep Learning Performance Guide, "Matrix Multiplication Background",
/// §Tile Quantization and §Wave Quantization). cuBLAS computes C (m×n) in
/// tile_m × tile_n tiles, one thread block each, and an SM holds one such
/// block at a time, so the tiles run in waves of `units`: a GEMM whose tiles
/// fill 1.1 waves takes as long as 2 full ones, and one of 40 tiles over a
/// shallow inner dimension (k < 512, too shallow to split) leaves 68
/// of an A100's 108 SMs idle. When the tiles fill less than one wave and the
/// inner dimension is deep, cuBLAS splits it (split-K) into up to units/tiles
/// slices of at least split_k_depth each, whose partial sums it adds after.
/// The efficiency table then describes a GEMM whose waves are full.
class GemmWaves {
 public:
  /// No quantization: the device is not tiled this way (CPU ranks).
  GemmWaves() = default;
  GemmWaves(int sms, int tile_m, int tile_n, int split_k_depth)
      : units_(sms), tile_m_(tile_m), tile_n_(tile_n), depth_(split_k_depth), inv_tile_m_(1.0 / tile_m),
        inv_tile_n_(1.0 / tile_n), inv_units_(1.0 / sms), inv_depth_(1.0 / split_k_depth) {}

  [[nodiscard]] int units() const { return units_; }  // SMs; 0: utilization 1
  [[nodiscard]] int tile_m() const { return tile_m_; }
  [[nodiscard]] int tile_n() const { return tile_n_; }
  [[nodiscard]] int split_k_depth() const { return depth_; }
  /// Share of the SM slots of the waves a GEMM (m×n, inner k, `batch` of them)
  /// occupies that its tiles fill, in (0, 1].
  [[nodiscard]] double utilization(double m, double n, double k, double batch = 1) const;

 private:
  int units_ = 0, tile_m_ = 128, tile_n_ = 128, depth_ = 256;
  // Their reciprocals: the search prices millions of GEMM shapes, and a
  // multiplication is several times cheaper than a division.
  double inv_tile_m_ = 0, inv_tile_n_ = 0, inv_units_ = 0, inv_depth_ = 0;
};

/// α/β efficiency of one fabric level (intra-node or inter-node).
struct FabricProfile {
  double busbw_efficiency = 1;  // achieved bus bandwidth / link bandwidth (nccl-tests busbw)
  double latency_s = 0;         // α per algorithm step, seconds (added to the cluster's latency_us)
  double base_latency_s = 0;    // fixed cost of one collective call (launch, protocol setup), seconds
};

/// Hardware figures `ztune calibrate` measured where they replace the cluster
/// file's (a CPU rank's peak, a link faster than its datasheet, the host Adam
/// rate). They make a fitted profile self-sufficient: with_measured_figures()
/// puts them into the cluster the profile is used with. Unset: the cluster's
/// figure stands. Catalog profiles carry none.
struct MeasuredFigures {
  std::string cluster;  // the cluster they were measured on
  std::optional<double> peak_tflops_fp32;
  std::optional<double> hbm_bandwidth_gbps;
  std::optional<double> pcie_bandwidth_gbps;
  std::optional<double> cpu_adam_gparams_per_s;  // host Adam rate per node
  struct Level {
    bool fitted = false;  // α/β fitted: the cluster's collective_efficiency no longer applies
    std::optional<double> bandwidth_gbps;
    std::optional<double> latency_us;
    [[nodiscard]] bool empty() const { return !fitted && !bandwidth_gbps && !latency_us; }
  };
  Level intra_node;
  Level inter_node;
  [[nodiscard]] bool empty() const;
};

struct HardwareProfile {
  std::string name;    // e.g. "a100"
  std::string source;  // where the numbers come from
  std::string gpu;     // the GPU family it describes ("A100"); matched against GpuSpec::name's prefix
  std::string file;    // where it was read from (profile_from_json's `file`; "" when made in code)

  // GEMM efficiency vs FLOPs of one (batched) GEMM call whose waves are full,
  // sizes descending; gemm_waves says how full a given shape's waves are.
  std::vector<EfficiencyPoint> gemm_efficiency;
  GemmWaves gemm_waves;
  // Fused attention-core batched GEMMs (QKᵀ and PV; head_dim-thin): efficiency
  // relative to the GEMM table at the same FLOPs.
  double attention_gemm_factor = 1;
  // cuDNN's fused flash attention (AttentionKernel::cudnn) against the same
  // table; the flash and standard kernels use attention_gemm_factor. A profile
  // without "cudnn_attention_factor" (no run that separates the two kernels)
  // prices cuDNN like FlashAttention-2.
  double cudnn_attention_factor = 1;
  // Memory-bound kernels (norms, softmax, dropout, GeLU, optimizer) run at this
  // fraction of the HBM datasheet bandwidth.
  double memory_bandwidth_efficiency = 0.8;
  double kernel_launch_s = 5e-6;  // GPU-side gap per kernel (launch latency between dependent kernels)

  FabricProfile intra_node;
  FabricProfile inter_node;
  double pcie_efficiency = 0.8;  // achieved / datasheet PCIe bandwidth
  double nvme_efficiency = 0.8;  // achieved / datasheet NVMe bandwidth

  MeasuredFigures measured;  // calibrated hardware figures (empty for catalog profiles)

  // The engine whose behaviour a prediction with this profile assumes
  // (with_engine(); default_profile_for attaches the catalog's ztune engine).
  EngineProfile engine;
  // What ztune's own executor was measured to do on this hardware (a
  // calibrated profile's "framework"/"overlap" sections); unset otherwise.
  std::optional<EngineProfile> measured_engine;

  /// What a calibrated profile's run fit was judged on (ztune calibrate): the
  /// training runs it learned from and its mean |predicted / measured − 1|
  /// on them, in sample and left out one at a time (none with a single run).
  /// How far a prediction with it can be trusted; unset for catalog profiles.
  struct RunsFit {
    int runs = 0;
    double in_sample_error = 0;
    std::optional<double> held_out_error;
  };
  std::optional<RunsFit> runs_fit;

  /// Efficiency of a GEMM of `flops` FLOPs with full waves (log-interpolated in the table).
  [[nodiscard]] double gemm_efficiency_at(double flops) const;
  /// Efficiency of one GEMM call of this shape (m×n, inner k, `batch` of them):
  /// the table's at its FLOPs times its waves' utilization. The one owner of
  /// what fraction of peak a GEMM reaches; the cost model and calibration's fit
  /// both read it.
  [[nodiscard]] double gemm_efficiency_of(double m, double n, double k, double batch = 1) const;
};

/// Parses a profile document (schema "ztune.profile/1"); strict, names file and path.
HardwareProfile profile_from_json(const nlohmann::json& doc, const std::string& file);
/// A run fit as the profile file and predict --json's accuracy.your_runs both
/// carry it: {"runs", "in_sample_error", "held_out_error"} (null with one run).
[[nodiscard]] nlohmann::json runs_fit_to_json(const HardwareProfile::RunsFit& f);
nlohmann::json profile_to_json(const HardwareProfile& p);

/// The default profile for the cluster's GPU type (data/profiles/<family>.json,
/// the family being the GPU name's prefix: "A100-SXM4-80GB" → a100.json).
/// Throws InputError naming the GPU and the profiles available when none matches.
HardwareProfile default_profile_for(const Cluster& c);
/// The catalog's profile for the cluster's GPU family, or nothing when the
/// catalog has none (a GPU the user describes with --profile FILE): what a
/// prediction's accuracy is compared with, never a reason to refuse it.
[[nodiscard]] std::optional<HardwareProfile> catalog_profile_for(const Cluster& c);
/// A profile file (schema "ztune.profile/1"); InputError names file and path.
/// The engine attached is the catalog's ztune engine (or the measured one).
HardwareProfile load_profile(const std::string& path);

/// `hw` driven by engine `e`: for the ztune engine, the profile's measured
/// engine where it has one (a calibration of ztune's executor on that hardware).
[[nodiscard]] HardwareProfile with_engine(HardwareProfile hw, const EngineProfile& e);
/// with_engine(hw, load_engine_profile(name)), its elementwise chains priced
/// fused (compiled()) when the engine runs under a graph compiler: the one
/// rule by which predict, search, export, the planner and validation price an
/// engine's plans.
[[nodiscard]] HardwareProfile with_engine(HardwareProfile hw, const std::string& name, bool graph_compiled = false);

/// The cluster with the profile's measured figures in place of its own
/// (unchanged when the profile carries none). Every prediction made with a
/// profile uses the cluster this returns. Throws InputError when the profile
/// was fitted on another GPU family than the cluster's ($.gpu: "A100" for
/// A100-SXM4-80GB, "CPU" for CPU ranks).
Cluster with_measured_figures(Cluster c, const HardwareProfile& p);
/// Where the profile's measured figures came from when that is not cluster `c`
/// (by name): a note that they replace c's own all the same, naming them, or ""
/// (none, or measured on c). A profile calibrated on one DGX H100 and used for
/// 128 of them is meant; one calibrated on a DGX-2 is a mistake to see.
[[nodiscard]] std::string measured_elsewhere_note(const Cluster& c, const HardwareProfile& p);
/// "profile NAME (FILE)", or "profile NAME" for one made in code: the profile
/// as messages name it (the file a user passed, not only the name inside it).
[[nodiscard]] std::string profile_label(const HardwareProfile& p);
/// `base` updated with the figures of `calibrated` that differ from `before`
/// (the cluster the fit started from). The caller sets the levels' `fitted`.
MeasuredFigures measured_figures(const Cluster& before, const Cluster& calibrated, MeasuredFigures base);

}  // namespace ztune
