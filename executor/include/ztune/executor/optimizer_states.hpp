#pragma once
// The optimizer of one rank: Adam's states for the floats the rank updates and
// the step over them. ParamStore decides which floats those are (ZeRO stage 0:
// the whole replicated buffer; stages 1-3: its owned pieces, bucket after
// bucket) and hands the matching parameter and gradient pointers in; this class
// decides where the states live and where Adam runs:
//  - on the device (default): m and v beside the parameters, AdamW there;
//  - offload (ZeRO-Offload, Ren et al. 2021): fp32 master weights, m and v in
//    host memory; each step copies the gradients down, runs host_adamw over the
//    thread pool and copies the updated weights back up;
//  - offload to NVMe (ZeRO-Infinity, Rajbhandari et al. 2021): the same, with
//    master, m and v in a file (NvmeOptimizerStates);
//  - 1-bit Adam (stage 0 only): OnebitAdam owns its states and exchanges the
//    momentum itself, so the gradients stay local while it compresses.
// With 16-bit storage (OptimizerStateOptions::storage) the parameters and
// gradients handed in are bf16/fp16: on the device the states gain fp32 master
// weights (MemCategory optimizer) and the fused step writes the 16-bit copies;
// offloaded states already hold masters, and the gradients and parameters cross
// PCIe as fp32 (converted on the device). On the device the master and the
// moments may themselves be 16-bit (OptimizerStateOptions::states): the step
// computes in fp32 on their widened values and stores them rounded.
// Kept apart from ParamStore because where the states live changes where the
// step's arithmetic and memory go, not how parameters and gradients are
// sharded; the one exception, 1-bit Adam's local gradients, the store asks
// about through gradients_local().
#include <cstddef>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ztune/executor/backend.hpp"
#include "ztune/executor/communicator.hpp"
#include "ztune/kernels/adamw.hpp"
#include "ztune/kernels/thread_pool.hpp"

namespace ztune::executor {

struct OptimizerStateOptions {
  bool offload = false;  // master weights, m and v in host memory, Adam on the host
  // With offload: the file holding this rank's states on NVMe; empty = host memory.
  std::string nvme_file;
  // Without offload, >= 0: 1-bit Adam with this many warm-up steps (needs ZeRO stage 0).
  int onebit_freeze_step = -1;
  // The parameters' storage (16-bit needs master weights) and the gradients'.
  StorageDtype storage = StorageDtype::fp32;
  StorageDtype grad_storage = StorageDtype::fp32;
  // The states' own dtypes on the device (Plan::master_dtype, moments_dtype):
  // fp32, or 16-bit as NeMo's distributed_fused_adam dtype and Megatron-Core's
  // precision-aware optimizer keep them. The master applies with 16-bit
  // storage only (fp32 parameters are their own master). Not with offload or
  // 1-bit Adam (their states are fp32: check_plan refuses those).
  AdamWStates states;
};

class OnebitAdam;
class NvmeOptimizerStates;

class OptimizerStates {
 public:
  /// States for `n` floats. `dp` is the data-parallel group 1-bit Adam averages over.
  /// Throws std::runtime_error naming the file when the NVMe file cannot be created.
  OptimizerStates(std::size_t n, const OptimizerStateOptions& options, Communicator& dp, Backend& backend,
                  kernels::ThreadPool& host_pool);
  ~OptimizerStates();
  OptimizerStates(const OptimizerStates&) = delete;
  OptimizerStates& operator=(const OptimizerStates&) = delete;

  /// True while 1-bit Adam compresses at 0-based step `step`: gradients are not reduced over dp.
  [[nodiscard]] bool gradients_local(int step) const;
  /// With the states on NVMe: whether their file got direct I/O (O_DIRECT); nullopt otherwise.
  [[nodiscard]] std::optional<bool> nvme_direct_io() const;

  /// Whether the parameters are the master weights: fp32 storage, or 16-bit
  /// states whose master dtype is the parameters' own (a copy would only
  /// repeat them: the step updates the parameters, as NeMo's Apex
  /// DistributedFusedAdam does with store_params false). Not with offload.
  [[nodiscard]] bool params_are_master() const { return !offload_ && states_.master == storage_; }
  /// Whether the states hold master weights of their own.
  [[nodiscard]] bool has_master() const { return !params_are_master(); }
  /// With has_master(): the master weights of [off, off+len) start as the len
  /// values at `params` (backend memory).
  void initialise_master(std::size_t off, ConstTensorRef params, std::size_t len);

  /// Stage 0: the step over all n elements of the replicated buffers (1-bit Adam's
  /// own, or AdamW's); `step` is the 0-based step 1-bit Adam's phase depends on.
  /// The gradients count times grad_scale (1-bit Adam: 1 only).
  void step_replicated(TensorRef params, ConstTensorRef grads, const kernels::AdamWParams& h, int step,
                       float grad_scale = 1.0f);
  /// AdamW on the states' range [off, off+len), whose parameters and gradients
  /// are `param` and `grad` (backend memory; `param` is updated in place).
  void step(TensorRef param, ConstTensorRef grad, std::size_t off, std::size_t len, const kernels::AdamWParams& h,
            float grad_scale = 1.0f);
  /// One range of the states and the values it updates, for the step below.
  struct Range {
    TensorRef param;
    ConstTensorRef grad;
    std::size_t off = 0, len = 0;
  };
  /// step() on each range in order; with the states on the device, every range
  /// in one fused AdamW (issue 24: one launch on CUDA).
  void step(const std::vector<Range>& ranges, const kernels::AdamWParams& h, float grad_scale = 1.0f);

  /// The states in checkpoint order: 1-bit Adam's; or master, m, v (offload,
  /// host memory or NVMe alike, or 16-bit storage on the device); or m, v.
  void write_state(std::ostream& out) const;
  /// `legacy_master`: the states were written before kCheckpointMasterInParams
  /// and hold a copy of a master the parameters now are, which is read past.
  void read_state(std::istream& in, bool legacy_master = false);
  /// Bytes write_state() writes (with `legacy_master`, what such an older shard holds).
  [[nodiscard]] std::size_t state_bytes(bool legacy_master = false) const;

 private:
  // Whether a shard written before kCheckpointMasterInParams holds a master copy these states no longer keep.
  [[nodiscard]] bool wrote_legacy_master(bool legacy_master) const;

  std::size_t n_;
  bool offload_;
  StorageDtype storage_, grad_storage_;
  AdamWStates states_;  // the dtypes of master_, m_ and v_
  Backend& be_;
  kernels::ThreadPool& host_pool_;
  Buffer m_, v_;                                  // on the device
  Buffer master_;                                 // on the device, beside 16-bit parameters of another dtype
  Buffer host_master_, host_m_, host_v_;          // offload to host memory
  Buffer host_grad_;                              // offload: the gradients on their way to host Adam
  std::unique_ptr<NvmeOptimizerStates> nvme_;     // offload to NVMe: master, m, v on the drive
  std::unique_ptr<OnebitAdam> onebit_;
};

}  // namespace ztune::executor
