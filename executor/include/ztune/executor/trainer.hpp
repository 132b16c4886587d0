#pragma once
// One rank's training loop: the data slice of each micro-batch, the pipeline
// schedule with activation sends and receives, gradient reduction, global-norm
// clipping, the learning-rate schedule and the optimizer step.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ztune/executor/backend.hpp"
#include "ztune/executor/gpt_stage.hpp"
#include "ztune/executor/loss_scaler.hpp"
#include "ztune/executor/param_store.hpp"
#include "ztune/executor/process_groups.hpp"
#include "ztune/executor/safetensors.hpp"
#include "ztune/executor/token_source.hpp"
#include "ztune/executor/train_options.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"

namespace ztune::executor {

struct StepResult {
  double loss = 0;       // mean over the global batch's tokens (all ranks agree)
  double grad_norm = 0;  // before clipping (unscaled; +inf on an fp16 overflow)
  double lr = 0;
  double seconds = 0;
  double loss_scale = 1;  // fp16: the dynamic loss scale this step used (else 1)
  bool skipped = false;   // fp16: the gradients overflowed and the optimizer step was skipped
};

class Trainer {
 public:
  Trainer(const Transformer& m, const Plan& plan, const TrainOptions& opt, Communicator& world, Backend& backend,
          const TokenSource& data);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Seeded initialisation, or the --init-from file (every rank reads its shards).
  void initialise();
  /// Runs global step `step` (0-based). Collective over the world.
  StepResult step(int step);
  /// learning rate of 0-based step `step`.
  [[nodiscard]] double learning_rate(int step) const;

  /// Full tensors with Hugging Face names and shapes, assembled on world rank 0
  /// (empty elsewhere). Collective. `grads`: gradients (ZeRO stage < 2) instead of values.
  std::vector<NamedTensor> collect_full(bool grads);

  ProcessGroups& groups() { return groups_; }
  ParamStore& store() { return *store_; }

  /// This rank's checkpoint payload (format 3): the parameters and optimizer
  /// states, then fp16's loss scaler (its scale, schedule and skipped steps).
  [[nodiscard]] std::string checkpoint_state() const;
  /// Its size as format `version` wrote it (2: without the scaler).
  [[nodiscard]] std::size_t checkpoint_state_bytes(std::uint32_t version) const;
  /// Restores a payload of format `version`; an error message when it cannot
  /// continue the run exactly (an fp16 plan's version-2 shard has no scaler).
  [[nodiscard]] std::optional<std::string> restore_checkpoint_state(const std::string& bytes, std::uint32_t version);
  [[nodiscard]] const Plan& plan() const { return plan_; }

 private:
  MicroBatch micro_batch(int step, int micro) const;
  /// The pipeline passes of one step, with their sends and receives; returns
  /// this stage's Σ of the loss over rows (last stage, else 0).
  double run_pipeline(const std::vector<MicroBatch>& data);
  Transformer m_;
  Plan plan_;
  TrainOptions opt_;
  Backend& be_;
  const TokenSource& data_;
  ProcessGroups groups_;
  kernels::ThreadPool host_pool_;
  std::unique_ptr<ParamStore> store_;
  std::vector<std::unique_ptr<GptStage>> chunks_;  // the stage's model chunks (one unless interleaved)
  double loss_row_ = 0;                      // ∂L/∂loss_row: 1 / tokens in the global batch
  std::optional<DynamicLossScaler> scaler_;  // fp16 plans only
  float applied_scale_ = 1;                  // the scale the last stage's ∂loss currently holds
  bool dumped_grads_ = false;
};

}  // namespace ztune::executor
