#pragma once
// Parameters, gradients and optimizer states of one rank, with ZeRO data
// parallelism (Rajbhandari et al. 2020):
//  - parameters are grouped in buckets of whole units (layers) up to
//    reduce_bucket_elems; each bucket is padded to a multiple of dp and rank r
//    owns piece r of every bucket;
//  - stage 0: everything replicated; gradients all-reduced per bucket;
//  - stage 1: optimizer states of the owned pieces only; gradients all-reduced,
//    each rank updates its pieces, parameters all-gathered;
//  - stage 2: also gradients: each bucket's gradients are reduce-scattered to their
//    owners on every micro-batch and the full-size bucket buffer is freed as
//    soon as that bucket's piece has arrived: at most kExecutorReductionsInFlight
//    reductions run at once (the backward waits for the oldest beyond that),
//    so a rank holds a few buckets' full gradients, never the whole model's
//    (DeepSpeed's overlap_comm double-buffers its reduction buckets alike);
//  - stage 3: also parameters: a bucket is all-gathered before use (the next one
//    prefetched asynchronously) and freed after, unless all its tensors are below
//    param_persistence_threshold (then it stays until the next optimizer step).
//    Under a pipeline (StoreOptions::hold_gathered, Plan::zero3_held_through_step:
//    FSDP2 as torch.distributed.pipelining runs it) every bucket stays gathered
//    from its first use to the optimizer step, and the gradients accumulate in
//    full buffers, reduce-scattered once, on the last micro-batch, as stages 0/1
//    reduce theirs.
// Gradient reduction starts when a bucket's last unit finished its backward
// (overlap_comm), on the last micro-batch for stages 0/1 and on every one for 2/3.
// The optimizer states of the pieces a rank updates (on the device, offloaded
// to host memory or NVMe, or 1-bit Adam's) and the step over them are
// OptimizerStates' (optimizer_states.hpp); the store hands it those pieces.
// Sums over the data-parallel group use SUM: the loss gradient is already
// scaled by 1/(global tokens).
// Mixed-precision storage (StoreOptions::storage bf16/fp16; issue 24): the
// parameters the forward reads and every gather of them are 16-bit;
// OptimizerStates keeps fp32 master weights of the pieces this rank updates and
// writes their 16-bit copies in the step, as DeepSpeed's and Megatron's
// mixed-precision optimizers do. Gradients, and their reductions, are kept in
// grad_storage: 16-bit, or fp32 (Megatron's main_grad, DeepSpeed's BF16_Optimizer
// accumulation). Unscaling and clipping of 16-bit gradients multiply them inside
// the step (grad_scale), not the stored values in place.
#include <cstddef>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ztune/executor/backend.hpp"
#include "ztune/executor/param_specs.hpp"
#include "ztune/executor/process_groups.hpp"
#include "ztune/kernels/adamw.hpp"
#include "ztune/kernels/thread_pool.hpp"

namespace ztune::executor {

struct StoreOptions {
  int zero_stage = 0;
  bool offload_optimizer = false;
  bool overlap_comm = true;
  bool sequence_parallel = false;
  double bucket_elems = 5e8;
  double persistence_threshold = 0;
  int onebit_freeze_step = -1;  // >= 0: 1-bit Adam (stage 0) with this many warm-up steps (onebit_adam.hpp)
  // ZeRO-3: the parameter partitions live in host memory and are copied to
  // the device for each gather (ZeRO-Infinity's offload_param to CPU) ...
  bool offload_params = false;
  // ... or, when this names a file, on NVMe (offload_param to NVMe): read into
  // a host staging buffer for each gather, written back after each step.
  std::string nvme_params_file;
  // ZeRO++ (stage 3, one node): int8 weight gathers, int4 gradient reduction
  // (param_store.cpp); hpZ's secondary partition is the primary one on one node,
  // across nodes a slice per rank of the node (backward gathers stay in the node).
  bool zeropp = false;
  // Stage 3 under a pipeline: hold the gathered buckets and the whole gradients
  // through the step, reducing once (see above).
  bool hold_gathered = false;
  // With offload_optimizer: the file holding this rank's optimizer states on
  // NVMe (ZeRO-Infinity); empty = the states stay in host memory (ZeRO-Offload).
  std::string nvme_file;
  // Parameters (and so activations) in fp32, or 16-bit with fp32 masters; not
  // with 1-bit Adam or parameters on NVMe (executor_support refuses those).
  StorageDtype storage = StorageDtype::fp32;
  // Gradients and their data-parallel reductions: fp32, or storage's 16-bit type.
  StorageDtype grad_storage = StorageDtype::fp32;
  // The optimizer states' dtypes on the device (OptimizerStateOptions::states).
  AdamWStates optimizer_states;
};

class OptimizerStates;
class NvmeParamPartitions;

enum class Direction : std::uint8_t { forward, backward };

class ParamStore {
 public:
  ParamStore(std::vector<ParamSpec> specs, int units, const StoreOptions& options, Backend& backend,
             ProcessGroups& groups, kernels::ThreadPool& host_pool);
  ~ParamStore();
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  [[nodiscard]] const std::vector<ParamSpec>& specs() const { return specs_; }
  /// Index of the parameter named `name` in unit `unit` (-1 when absent).
  [[nodiscard]] int find(std::string_view name, int unit) const;
  [[nodiscard]] int buckets() const;

  [[nodiscard]] StorageDtype storage() const { return opt_.storage; }
  [[nodiscard]] StorageDtype grad_storage() const { return opt_.grad_storage; }
  /// Parameter values (stage 3: the unit must be acquired), in storage().
  TensorRef param(int id);
  /// Gradient accumulator of the current micro-batch (stages 2/3) or step (0/1), in grad_storage().
  TensorRef grad(int id);

  /// Stage 3: gather the unit's bucket (prefetching the next one in `dir`); else no-op.
  void acquire(int unit, Direction dir);
  /// acquire() for a unit used out of its place in the layer order (the tied
  /// word embedding at the head): its neighbouring bucket is not what runs
  /// next, so nothing is prefetched (the head's forward would otherwise hold
  /// the first layer's weights through the whole backward).
  void acquire_out_of_order(int unit, Direction dir);
  void release(int unit);

  /// Fills every local parameter: fill(id, out) writes spec.shard.numel() values.
  void initialise(const std::function<void(int, float*)>& fill);
  /// The full local (tensor-parallel) shard of parameter `id`, gathered over dp for stage 3.
  /// Collective over the dp group.
  std::vector<float> local_values(int id);

  /// The 0-based step about to run (1-bit Adam's phase depends on it).
  void begin_step(int step) { step_ = step; }
  /// True while 1-bit Adam compresses: gradients stay local (not reduced over dp).
  [[nodiscard]] bool gradients_local() const;
  /// With NVMe offload: whether every NVMe file got direct I/O (O_DIRECT); nullopt without.
  [[nodiscard]] std::optional<bool> nvme_direct_io() const;

  void zero_grads();
  /// `last_micro`: the unit's last micro-batch of the step.
  void unit_backward_done(int unit, bool last_micro);
  /// After each backward pass; `last` = the stage's last backward of the step
  /// (with interleaved 1F1B, the last of its chunks' passes): deferred buckets
  /// are reduced then, and every reduction is awaited.
  void finish_backward(bool last);
  /// Σ g² over the gradients this rank owns and counts (to be summed over the world).
  double owned_grad_sq();
  /// The gradients times s (16-bit gradients: deferred into the next step's grad_scale).
  void scale_grads(float s);
  /// What the stored gradients are still to be multiplied by (1 for fp32 gradients).
  [[nodiscard]] float pending_grad_scale() const { return grad_scale_; }
  void optimizer_step(const kernels::AdamWParams& h);

  /// Everything a checkpoint must hold to continue exactly: stored parameters,
  /// optimizer states (and offloaded master copies).
  void write_state(std::ostream& out) const;
  /// `legacy_master`: an older shard's optimizer states (OptimizerStates::read_state).
  void read_state(std::istream& in, bool legacy_master = false);
  /// Bytes write_state() writes (with `legacy_master`, what such an older shard holds).
  [[nodiscard]] std::size_t state_bytes(bool legacy_master = false) const;

 private:
  struct Bucket;
  struct Pending;
  /// Waits for the oldest reduction and folds its piece into the owned gradients.
  void retire_oldest();
  Bucket& bucket_of_unit(int unit);
  void start_gather(Bucket& b, bool quantized, Direction dir);
  /// ZeRO++ hpZ across nodes: bucket b's backward gathers come from secondary_.
  [[nodiscard]] bool hpz(const Bucket& b) const;
  /// acquire(); `full_precision`: the stored values even under ZeRO++ (checkpoints); `prefetch`:
  /// start gathering the next bucket in `dir` (never with full_precision).
  void acquire_bucket(int unit, Direction dir, bool full_precision, bool prefetch);
  [[nodiscard]] bool quantized_gathers(const Bucket& b) const;
  void bucket_ready(Bucket& b, bool last_micro);
  void launch_reduction(Bucket& b);
  void sync_replicas(Bucket& b);
  TensorRef owned_param_piece(Bucket& b);
  /// This rank's current values of bucket b's partition (stage 3 with NVMe
  /// parameters: read into param_stage_, valid until its next use).
  ConstTensorRef owned_param_values(Bucket& b);
  [[nodiscard]] std::size_t bucket_index(const Bucket& b) const;
  void write_param_state(std::ostream& out) const;
  void read_param_state(std::istream& in);
  TensorRef owned_grad_piece(Bucket& b);
  [[nodiscard]] bool stage3() const { return opt_.zero_stage == 3; }
  /// Gradients reduce-scattered after every micro-batch (stages 2/3, but not held).
  [[nodiscard]] bool reduces_every_micro() const { return opt_.zero_stage >= 2 && !opt_.hold_gathered; }
  /// Full-size gradient buffers accumulated over the step (stages 0/1, or held).
  [[nodiscard]] bool whole_grads() const { return opt_.zero_stage < 2 || opt_.hold_gathered; }

  std::vector<ParamSpec> specs_;
  StoreOptions opt_;
  Backend& be_;
  ProcessGroups& g_;
  int dp_ = 1, dp_rank_ = 0;
  std::vector<int> unit_bucket_;
  std::vector<std::size_t> param_offset_;  // within its bucket
  std::vector<int> param_bucket_;
  std::vector<Bucket> buckets_;
  std::size_t full_size_ = 0, shard_size_ = 0;
  Buffer params_, param_shards_, grads_, grad_shards_;
  std::vector<Pending> pending_;
  std::unique_ptr<OptimizerStates> optimizer_;  // for the owned pieces (stage 0: everything)
  std::unique_ptr<NvmeParamPartitions> nvme_params_;  // offload_param to NVMe: the partitions on the drive
  Buffer param_stage_;  // host_staging: one bucket's partition on its way to or from the drive
  Buffer secondary_;    // ZeRO++ hpZ across nodes: this rank's slices of the gathered weights
  int step_ = 0;
  float grad_scale_ = 1.0f;  // 16-bit gradients: scale_grads() factors not yet applied
};

}  // namespace ztune::executor
