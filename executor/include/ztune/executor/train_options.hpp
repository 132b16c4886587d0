#pragma once
// What ztune-worker is asked to do besides the plan: steps, seed, optimizer
// hyper-parameters, data, files.
#include <cstdint>
#include <string>

#include "ztune/executor/loss_scaler.hpp"

namespace ztune::executor {

struct TrainOptions {
  int steps = 10;
  std::uint64_t seed = 1234;
  // AdamW with linear warm-up then cosine decay to min_lr_ratio·lr over `steps`
  // (Loshchilov & Hutter 2017 SGDR's cosine, as GPT-3 §B trains).
  float lr = 1e-3f;
  float min_lr_ratio = 0.1f;
  int warmup_steps = 2;
  float weight_decay = 0.01f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float grad_clip = 1.0f;           // global-norm clipping; 0 = off
  std::string data = "synthetic";   // a uint16 token file, or "synthetic"
  int threads = 1;                  // compute threads per rank
  std::string init_from;            // safetensors with Hugging Face GPT-2 names
  std::string save;                 // safetensors written at the end
  std::string dump_grads;           // test hook: step 1's reduced gradients as safetensors
  std::string record;               // run record JSON (rank 0)
  std::string record_fallback;      // where rank 0 writes it when `record` cannot be written (a full disk)
  std::string progress;             // rank 0 appends each finished step here (JSON lines), as it goes
  std::string checkpoint_dir = "ztune-checkpoints";
  int checkpoint_every = 0;
  int keep_checkpoints = 0;         // committed steps kept (the newest); 0 = every one
  bool resume = false;
  int kill_after_step = 0;          // test hook: SIGKILL this rank once that checkpoint is committed
  LossScaleConfig loss_scale;       // fp16 plans: DeepSpeed's dynamic loss scaling (defaults: its ds_config's)
  // Test hook: a 16-bit plan keeps fp32 storage (its parameters, gradients and
  // activations), so only its loss scaling differs from the fp32 plan's
  // (tests/executor/test_loss_scaling.cpp's exactness oracle).
  bool fp32_storage = false;
  // Plans offloading the optimizer to NVMe: the directory of the per-rank state
  // files (DeepSpeed's offload_optimizer.nvme_path); empty = the system's
  // temporary directory.
  std::string nvme_dir;
  // Consecutive world ranks per node (Open MPI's local size; a smaller value
  // makes one machine act as several nodes); 0 = all on one node. ZeRO++'s
  // gradient reduction is two-level when the data-parallel group spans nodes.
  int ranks_per_node = 0;
};

}  // namespace ztune::executor
