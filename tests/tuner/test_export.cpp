#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tuner_fixtures.hpp"
#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/text.hpp"
#include "ztune/tuner/export.hpp"

using namespace ztune;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;

namespace {

// A data-parallel plan of 8 ranks (micro-batch 8 of 64 sequences) of a small
// Korthikanti model on one node of `cluster`, with attention kernel `k`.
PlanFile dense_plan_on(const char* cluster, AttentionKernel k) {
  PlanFile pf;
  pf.model = test::korthikanti_model(24, 2048, 16, 64);
  pf.cluster = load_cluster(cluster);
  pf.plan.dp = 8;
  pf.plan.micro_batch = 8;
  pf.plan.global_batch = 64;
  pf.plan.attention = k;
  return pf;
}

// Data parallelism over one DGX A100 (dp 8, micro-batch 4 of 32 sequences)
// of a small Korthikanti model at ZeRO stage `zero`: the plan the switches
// of one engine or another are tried on.
PlanFile dp8_plan(int zero) {
  PlanFile pf;
  pf.model = test::korthikanti_model(24, 2048, 16, 64);
  pf.cluster = load_cluster("dgx-a100-80gb");
  pf.plan.dp = 8;
  pf.plan.zero_stage = zero;
  pf.plan.micro_batch = 4;
  pf.plan.global_batch = 32;
  return pf;
}

PlanFile zero2_offload_plan() {
  PlanFile pf;
  Plan& p = pf.plan;
  p.dp = 16;
  p.zero_stage = 2;
  p.offload_optimizer = OffloadTarget::cpu;
  p.micro_batch = 4;
  p.grad_accum = 8;
  p.global_batch = 512;
  p.precision = Precision::fp16;
  p.recompute = Recompute::full;
  pf.cluster = load_cluster("dgx2");
  pf.model = load_transformer("gpt2-1.5b");
  return pf;
}

}  // namespace

TEST_CASE("DeepSpeed export of a ZeRO-2 offload plan gives the expected ds_config", "[tuner][export]") {
  // Written by hand from DeepSpeed's configuration documentation (keys and
  // defaults of zero_optimization, fp16 dynamic loss scaling, activation_checkpointing).
  const auto expected = nlohmann::json::parse(R"({
    "train_batch_size": 512,
    "train_micro_batch_size_per_gpu": 4,
    "gradient_accumulation_steps": 8,
    "gradient_clipping": 1.0,
    "steps_per_print": 10,
    "wall_clock_breakdown": false,
    "zero_optimization": {
      "stage": 2,
      "overlap_comm": true,
      "contiguous_gradients": true,
      "reduce_scatter": true,
      "reduce_bucket_size": 500000000,
      "allgather_partitions": true,
      "allgather_bucket_size": 500000000,
      "offload_optimizer": {"device": "cpu", "pin_memory": true}
    },
    "fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 16, "loss_scale_window": 1000,
             "hysteresis": 2, "min_loss_scale": 1},
    "activation_checkpointing": {"partition_activations": false, "cpu_checkpointing": false,
                                 "contiguous_memory_optimization": false, "number_checkpoints": null,
                                 "synchronize_checkpoint_boundary": false, "profile": false}
  })");
  const auto pf = zero2_offload_plan();
  const auto got = deepspeed_config(pf, "plan.json");
  CHECK(got == expected);
  // DeepSpeed's own identity: train_batch_size = micro batch × accumulation × data-parallel ranks.
  CHECK(got["train_batch_size"].get<int>() ==
        got["train_micro_batch_size_per_gpu"].get<int>() * got["gradient_accumulation_steps"].get<int>() * 16);
  const auto launch = deepspeed_launch(pf, "ds_config.json", "plan.json");
  CHECK_THAT(launch, Contains("deepspeed --num_nodes 1 --num_gpus 16 pretrain_gpt.py"));
  CHECK_THAT(launch, Contains("--deepspeed_config ds_config.json"));
  CHECK_THAT(launch, Contains("--zero-stage 2"));
  CHECK_THAT(launch, Contains("--micro-batch-size 4 --global-batch-size 512"));
  // DeepSpeed runtime/engine.py _configure_optimizer (0.18.9, 0.19.8): ZeRO-Offload
  // with a client optimizer that is not DeepSpeedCPUAdam raises ZeRORuntimeException;
  // Megatron-DeepSpeed's --cpu-optimizer makes its optimizer DeepSpeedCPUAdam.
  CHECK_THAT(launch, Contains("--cpu-optimizer"));
  auto on_gpu = pf;
  on_gpu.plan.offload_optimizer = OffloadTarget::none;
  CHECK_THAT(deepspeed_launch(on_gpu, "ds_config.json", "plan.json"), !Contains("--cpu-optimizer"));
}

TEST_CASE("DeepSpeed export of a pipeline plan has a pipeline section and refuses what DeepSpeed cannot run",
          "[tuner][export]") {
  PlanFile pf;
  Plan& p = pf.plan;
  p.dp = 4;
  p.tp = 2;
  p.pp = 2;
  p.zero_stage = 1;
  p.micro_batch = 1;
  p.grad_accum = 16;
  p.global_batch = 64;
  p.precision = Precision::bf16;
  const auto ds = deepspeed_config(pf, "plan.json");
  // DeepSpeed's pipeline engine (deepspeed/runtime/pipe/engine.py, 0.18.9 and
  // 0.19.8) reads only activation_checkpoint_interval, pipe_partitioned,
  // grad_partitioned and use_reentrant from "pipeline"; "stages" and
  // "partition" (get_pipeline_config's defaults) are read by nothing, so they
  // are not written. The degree goes in the launch command instead.
  CHECK(ds["pipeline"] == nlohmann::json::parse(R"({"activation_checkpoint_interval": 0})"));
  CHECK_THAT(deepspeed_launch(pf, "ds_config.json", "plan.json"), Contains("--pipeline-model-parallel-size 2"));
  p.recompute = Recompute::full;
  // Full recomputation = checkpoint every layer: interval 1 (PipelineModule's activation_checkpoint_interval).
  CHECK(deepspeed_config(pf, "plan.json")["pipeline"] ==
        nlohmann::json::parse(R"({"activation_checkpoint_interval": 1})"));
  p.recompute = Recompute::none;
  CHECK(ds["bf16"] == nlohmann::json::parse(R"({"enabled": true})"));
  CHECK_FALSE(ds.contains("fp16"));
  CHECK(ds["zero_optimization"]["stage"] == 1);

  p.schedule = Schedule::interleaved;
  p.virtual_stages = 2;
  CHECK_THROWS_WITH(deepspeed_config(pf, "plan.json"), Contains("plan.json") && Contains("1F1B"));
  p.schedule = Schedule::one_f_one_b;
  p.virtual_stages = 1;
  p.pp = 1;
  p.dp = 8;
  p.grad_accum = 8;
  p.zero_stage = 2;
  p.onebit_adam = true;
  CHECK_THROWS_WITH(deepspeed_config(pf, "plan.json"), Contains("1-bit Adam"));
}

TEST_CASE("Megatron export of Korthikanti's 175B plan gives the expected arguments", "[tuner][export]") {
  PlanFile pf;
  pf.model = test::korthikanti_model(96, 12288, 96, 64);
  pf.cluster = load_cluster("dgx-a100-80gb");
  pf.cluster->nodes = 8;
  Plan& p = pf.plan;
  p.tp = 8;
  p.pp = 8;
  p.dp = 1;
  p.virtual_stages = 3;
  p.schedule = Schedule::interleaved;
  p.sequence_parallel = true;
  p.recompute = Recompute::selective;
  p.micro_batch = 1;
  p.grad_accum = 64;
  p.global_batch = 64;
  p.precision = Precision::bf16;
  p.overlap_comm = false;
  // By hand: 96 layers / (8 stages × 3 chunks) = 4 layers per virtual stage.
  const std::vector<std::string> expected{
      "--tensor-model-parallel-size", "8", "--pipeline-model-parallel-size", "8",
      "--num-layers-per-virtual-pipeline-stage", "4", "--sequence-parallel", "--recompute-granularity", "selective",
      "--micro-batch-size", "1", "--global-batch-size", "64",
      // Standard attention, priced unfused: Transformer Engine's default backend (auto) would fuse it.
      "--attention-backend", "unfused", "--bf16", "--num-layers", "96", "--hidden-size", "12288", "--ffn-hidden-size",
      "49152", "--num-attention-heads", "96", "--seq-length", "2048", "--max-position-embeddings", "2048",
      // The model's dropout, stated (both parsers default to 0.1; Llama's is 0).
      "--attention-dropout", "0.1", "--hidden-dropout", "0.1"};
  CHECK(megatron_arguments(pf, "plan.json") == expected);
  // Megatron-LM megatron/training/arguments.py validate_args: with
  // tensor_model_parallel_size > 1 (pre-Blackwell) it asserts
  // os.environ['CUDA_DEVICE_MAX_CONNECTIONS'] == "1"; the launch sets it.
  // Eight nodes meet at torchrun's c10d rendezvous (issue 23: a multi-node
  // launch without one does not start).
  CHECK_THAT(megatron_launch(pf, "plan.json"),
             StartsWith("CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun --nnodes 8 --nproc_per_node 8 --rdzv_backend c10d "
                        "--rdzv_endpoint $MASTER_ADDR:29500 --rdzv_id ztune pretrain_gpt.py"));

  p.recompute = Recompute::full;
  p.zero_stage = 1;
  const auto args = megatron_arguments(pf, "plan.json");
  auto has = [&](const std::string& a) { return std::find(args.begin(), args.end(), a) != args.end(); };
  CHECK(has("--use-distributed-optimizer"));
  CHECK(has("--recompute-method"));
  p.zero_stage = 3;
  p.pp = 1;
  p.virtual_stages = 1;
  p.schedule = Schedule::one_f_one_b;
  p.dp = 8;
  p.grad_accum = 8;
  {
    // ZeRO-2/3 without a pipeline: Megatron-FSDP, with the flags its user
    // guide (docs/discussions/megatron-fsdp-user-guide) requires.
    const auto fsdp = megatron_arguments(pf, "plan.json");
    auto after = [&](const std::string& flag) {
      const auto it = std::find(fsdp.begin(), fsdp.end(), flag);
      return it != fsdp.end() && it + 1 != fsdp.end() ? *(it + 1) : std::string();
    };
    CHECK(std::find(fsdp.begin(), fsdp.end(), "--use-megatron-fsdp") != fsdp.end());
    CHECK(after("--data-parallel-sharding-strategy") == "optim_grads_params");
    CHECK(after("--ckpt-format") == "fsdp_dtensor");
    CHECK(std::find(fsdp.begin(), fsdp.end(), "--no-gradient-accumulation-fusion") != fsdp.end());
    CHECK(std::find(fsdp.begin(), fsdp.end(), "--use-distributed-optimizer") != fsdp.end());
    // validate_args asserts CUDA_DEVICE_MAX_CONNECTIONS is not "1" under
    // Megatron-FSDP (with tp it only warns): the launch leaves it unset.
    if (p.tp > 1) CHECK_THAT(megatron_launch(pf, "plan.json"), !Contains("CUDA_DEVICE_MAX_CONNECTIONS"));
    p.zero_stage = 2;
    CHECK(std::find(megatron_arguments(pf, "plan.json").begin(), megatron_arguments(pf, "plan.json").end(),
                    "optim_grads") != megatron_arguments(pf, "plan.json").end());
    // With a pipeline it is refused with the reason.
    p.zero_stage = 3;
    p.pp = 2;
    p.dp = 4;
    CHECK_THROWS_WITH(megatron_arguments(pf, "plan.json"),
                      Contains("megatron cannot run") && Contains("Megatron-FSDP") && Contains("use pp 1"));
    p.pp = 1;
    p.dp = 8;
  }
  p.zero_stage = 1;
  p.tp = 1;
  p.sequence_parallel = false;
  // Without tensor parallelism Megatron-LM asserts nothing about the variable.
  CHECK_THAT(megatron_launch(pf, "plan.json"), StartsWith("torchrun --nnodes"));
  CHECK_FALSE(has("--use-flash-attn"));
}

TEST_CASE("flash attention exports as Megatron-LM's --use-flash-attn and Megatron-DeepSpeed's --use-flash-attn-v2",
          "[tuner][export][flash]") {
  const PlanFile pf = dense_plan_on("dgx-a100-80gb", AttentionKernel::flash);
  const auto mg = megatron_arguments(pf, "plan.json");
  CHECK(std::count(mg.begin(), mg.end(), "--use-flash-attn") == 1);
  const std::string ds = deepspeed_launch(pf, "ds_config.json", "plan.json");
  CHECK_THAT(ds, Contains(" --use-flash-attn-v2 "));
  // ds_config.json itself has no attention key: the switch is the training script's.
  CHECK_FALSE(deepspeed_config(pf, "plan.json").contains("attention"));
}

TEST_CASE("cuDNN attention exports as Megatron-Core's --attention-backend fused, DeepSpeed refuses it",
          "[tuner][export][cudnn]") {
  // Megatron-Core's arguments.py: --attention-backend {flash, fused, unfused,
  // local, auto}; fused is Transformer Engine's FusedAttention (cuDNN).
  PlanFile pf = dense_plan_on("dgx-h100", AttentionKernel::cudnn);
  Plan& p = pf.plan;
  const auto mg = megatron_arguments(pf, "plan.json");
  const auto at = std::find(mg.begin(), mg.end(), "--attention-backend");
  REQUIRE(at != mg.end());
  CHECK(*(at + 1) == "fused");
  CHECK(std::count(mg.begin(), mg.end(), "--use-flash-attn") == 0);
  REQUIRE(engine_violation(p, Engine::deepspeed).has_value());
  CHECK(*engine_violation(p, Engine::deepspeed) == EngineRule::ds_cudnn_attention);
  CHECK_THROWS_WITH(deepspeed_launch(pf, "ds_config.json", "plan.json"),
                    Contains("deepspeed cannot run this plan") && Contains("--use-flash-attn-v2"));
  CHECK_FALSE(engine_violation(p, Engine::fsdp).has_value());
  // torchtitan's context parallelism rings SDPA's flash kernels, Megatron-Core's both fused kernels.
  p.cp = 2;
  p.dp = 4;
  CHECK(*engine_violation(p, Engine::fsdp) == EngineRule::fs_cp_attention);
  CHECK_FALSE(engine_violation(p, Engine::megatron).has_value());
}

TEST_CASE("TP communication overlap exports as Megatron-LM's --tp-comm-overlap, the other engines refuse it",
          "[tuner][export][tp_overlap]") {
  // megatron/training/arguments.py: --tp-comm-overlap (Transformer Engine's
  // userbuffers), asserted to need --sequence-parallel.
  PlanFile pf = dense_plan_on("dgx-h100", AttentionKernel::cudnn);
  Plan& p = pf.plan;
  p.dp = 2;
  p.tp = 4;
  p.sequence_parallel = true;
  p.tp_comm_overlap = true;
  const auto mg = megatron_arguments(pf, "plan.json");
  CHECK(std::count(mg.begin(), mg.end(), "--tp-comm-overlap") == 1);
  CHECK(std::count(mg.begin(), mg.end(), "--sequence-parallel") == 1);
  CHECK_FALSE(engine_violation(p, Engine::megatron).has_value());
  p.attention = AttentionKernel::flash;  // (deepspeed refuses cudnn first)
  CHECK(engine_violation(p, Engine::deepspeed) == EngineRule::ds_tp_comm_overlap);
  CHECK(engine_violation(p, Engine::fsdp) == EngineRule::fs_tp_comm_overlap);
  CHECK(engine_violation(p, Engine::ztune) == EngineRule::zt_tp_comm_overlap);
  CHECK_THROWS_WITH(deepspeed_launch(pf, "ds_config.json", "plan.json"),
                    Contains("deepspeed cannot run this plan") && Contains("tp_comm_overlap false"));
  p.tp_comm_overlap = false;
  const auto plain = megatron_arguments(pf, "plan.json");
  CHECK(std::count(plain.begin(), plain.end(), "--tp-comm-overlap") == 0);
}

TEST_CASE("eager attention exports as --no-masked-softmax-fusion, torchtitan and ztune's executor refuse it",
          "[tuner][export][eager]") {
  PlanFile pf = dense_plan_on("dgx-a100-80gb", AttentionKernel::eager);
  const auto mg = megatron_arguments(pf, "plan.json");
  CHECK(std::count(mg.begin(), mg.end(), "--no-masked-softmax-fusion") == 1);
  CHECK(std::count(mg.begin(), mg.end(), "--use-flash-attn") == 0);
  CHECK_THAT(deepspeed_launch(pf, "ds_config.json", "plan.json"), Contains(" --no-masked-softmax-fusion"));
  CHECK(engine_violation(pf.plan, Engine::fsdp) == EngineRule::fs_eager_attention);
  CHECK(engine_violation(pf.plan, Engine::ztune) == EngineRule::zt_eager_attention);
  CHECK_FALSE(engine_violation(pf.plan, Engine::megatron).has_value());
  CHECK_FALSE(engine_violation(pf.plan, Engine::deepspeed).has_value());
  pf.plan.attention = AttentionKernel::standard;
  const auto plain = megatron_arguments(pf, "plan.json");
  CHECK(std::count(plain.begin(), plain.end(), "--no-masked-softmax-fusion") == 0);
}

TEST_CASE("unfused bias kernels export as Megatron's no-bias fusion switches, torchtitan and ztune refuse them",
          "[tuner][export][fusion]") {
  // Megatron-LM's arguments.py: --no-bias-gelu-fusion (GeLU models),
  // --no-bias-swiglu-fusion (SwiGLU), --no-bias-dropout-fusion; Megatron-DeepSpeed
  // inherited the first and the last.
  PlanFile pf = dense_plan_on("dgx-a100-80gb", AttentionKernel::standard);
  pf.plan.bias_fusion = false;
  auto mg = megatron_arguments(pf, "plan.json");
  CHECK(std::count(mg.begin(), mg.end(), "--no-bias-gelu-fusion") == 1);
  CHECK(std::count(mg.begin(), mg.end(), "--no-bias-swiglu-fusion") == 0);
  CHECK(std::count(mg.begin(), mg.end(), "--no-bias-dropout-fusion") == 1);
  CHECK_THAT(deepspeed_launch(pf, "ds_config.json", "plan.json"),
             Contains(" --no-bias-gelu-fusion --no-bias-dropout-fusion"));
  pf.model->activation = Activation::swiglu;
  mg = megatron_arguments(pf, "plan.json");
  CHECK(std::count(mg.begin(), mg.end(), "--no-bias-gelu-fusion") == 0);
  CHECK(std::count(mg.begin(), mg.end(), "--no-bias-swiglu-fusion") == 1);
  CHECK(engine_violation(pf.plan, Engine::fsdp) == EngineRule::fs_bias_fusion);
  CHECK(engine_violation(pf.plan, Engine::ztune) == EngineRule::zt_bias_fusion);
  CHECK_THAT(std::string(engine_rule_text(EngineRule::fs_bias_fusion)), Contains("expected bias_fusion true"));
  CHECK_FALSE(engine_violation(pf.plan, Engine::megatron).has_value());
  CHECK_FALSE(engine_violation(pf.plan, Engine::deepspeed).has_value());
  pf.plan.bias_fusion = true;
  const auto fused = megatron_arguments(pf, "plan.json");
  CHECK(std::count(fused.begin(), fused.end(), "--no-bias-dropout-fusion") == 0);
}

TEST_CASE("a stated gradient-reduction dtype exports as Megatron's switches and ds_config's communication_data_type",
          "[tuner][export][grads]") {
  // Megatron-LM's arguments.py: bf16 reduces its fp32 main_grad unless
  // --grad-reduce-in-bf16; fp16 reduces fp16 unless
  // --accumulate-allreduce-grads-in-fp32. DeepSpeed: communication_data_type.
  PlanFile pf = dense_plan_on("dgx-a100-80gb", AttentionKernel::flash);
  pf.plan.precision = Precision::bf16;
  const auto count = [&](const char* flag) {
    const auto a = megatron_arguments(pf, "plan.json");
    return std::count(a.begin(), a.end(), flag);
  };
  CHECK(count("--grad-reduce-in-bf16") == 0);  // unstated: Megatron-LM's own fp32
  CHECK_FALSE(deepspeed_config(pf, "plan.json").contains("communication_data_type"));
  pf.plan.grad_reduce_dtype = Precision::bf16;
  CHECK(count("--grad-reduce-in-bf16") == 1);
  CHECK(deepspeed_config(pf, "plan.json")["communication_data_type"] == "bf16");
  pf.plan.grad_reduce_dtype = Precision::fp32;
  CHECK(count("--grad-reduce-in-bf16") == 0);  // fp32 is Megatron-LM's default under --bf16
  CHECK(count("--accumulate-allreduce-grads-in-fp32") == 0);
  CHECK(deepspeed_config(pf, "plan.json")["communication_data_type"] == "fp32");
  pf.plan.precision = Precision::fp16;
  CHECK(count("--accumulate-allreduce-grads-in-fp32") == 1);
  // ztune's executor keeps and reduces gradients in fp32 or in the plan's own
  // 16-bit type (issue 24's 16-bit storage): both are its own.
  CHECK_FALSE(engine_violation(pf.plan, Engine::ztune).has_value());
  pf.plan.grad_reduce_dtype = Precision::fp16;
  CHECK_FALSE(engine_violation(pf.plan, Engine::ztune).has_value());
  CHECK_FALSE(engine_violation(pf.plan, Engine::deepspeed).has_value());
  CHECK(count("--accumulate-allreduce-grads-in-fp32") == 0);
}

TEST_CASE("DeepSpeed export writes the causal sparse attention layouts, 1-bit Adam and ZeRO++ as DeepSpeed reads them",
          "[tuner][export]") {
  // Expected sections written by hand from DeepSpeed's config documentation and
  // the defaults of deepspeed/ops/sparse_attention/sparsity_config.py, causal.
  PlanFile pf = zero2_offload_plan();
  Plan& p = pf.plan;
  p.zero_stage = 0;
  p.offload_optimizer = OffloadTarget::none;
  p.sparse_block = 32;
  p.sparse_attention = SparseLayout::fixed;
  CHECK(deepspeed_config(pf, "plan.json")["sparse_attention"] == nlohmann::json::parse(R"({
    "mode": "fixed", "block": 32, "different_layout_per_head": false, "attention": "unidirectional",
    "num_local_blocks": 4, "num_global_blocks": 1, "num_different_global_patterns": 1,
    "horizontal_global_attention": false})"));
  // BigBird and BSLongformer cannot be made causal through ds_config.json:
  // deepspeed/runtime/config.py (0.18.9, the last DeepSpeed with sparse
  // attention) get_sparse_bigbird_config / get_sparse_bslongformer_config read
  // no "attention" key, and BigBirdSparsityConfig / BSLongformerSparsityConfig
  // (ops/sparse_attention/sparsity_config.py) default to 'bidirectional'.
  for (const auto layout : {SparseLayout::bigbird, SparseLayout::longformer}) {
    p.sparse_attention = layout;
    CHECK_THROWS_WITH(deepspeed_config(pf, "plan.json"),
                      Contains("plan.json: deepspeed cannot run this plan") && Contains("causal"));
    CHECK_THROWS_WITH(deepspeed_launch(pf, "ds_config.json", "plan.json"), Contains("causal"));
  }
  p.sparse_attention = SparseLayout::variable;
  CHECK(deepspeed_config(pf, "plan.json")["sparse_attention"] == nlohmann::json::parse(R"({
    "mode": "variable", "block": 32, "different_layout_per_head": false, "attention": "unidirectional",
    "num_random_blocks": 0, "local_window_blocks": [4], "global_block_indices": [0],
    "horizontal_global_attention": false})"));

  p.sparse_attention = SparseLayout::none;
  p.onebit_adam = true;
  p.onebit_freeze_step = 400;
  const auto ds = deepspeed_config(pf, "plan.json");
  CHECK_FALSE(ds.contains("sparse_attention"));
  CHECK(ds["optimizer"] == nlohmann::json::parse(R"({"type": "OneBitAdam", "params": {
    "lr": 1e-4, "freeze_step": 400, "cuda_aware": false, "comm_backend_name": "nccl"}})"));

  // ZeRO++ (DeepSpeed's ZeRO++ tutorial): hpZ partition = GPUs per node (16 on a DGX-2).
  p.onebit_adam = false;
  p.zero_stage = 3;
  p.zeropp = true;
  const auto z = deepspeed_config(pf, "plan.json")["zero_optimization"];
  CHECK(z["zero_quantized_weights"] == true);
  CHECK(z["zero_hpz_partition_size"] == 16);
  CHECK(z["zero_quantized_gradients"] == true);
  // Stage 3's knobs, DeepSpeed's key for each plan field (zero/config.py).
  CHECK(z["stage3_max_live_parameters"] == 1000000000LL);
  CHECK(z["stage3_max_reuse_distance"] == 1000000000LL);
  p.max_reuse_distance = 3e9;
  CHECK(deepspeed_config(pf, "plan.json")["zero_optimization"]["stage3_max_reuse_distance"] == 3000000000LL);
  p.max_reuse_distance = 0;
  CHECK(deepspeed_config(pf, "plan.json")["zero_optimization"]["stage3_max_reuse_distance"] == 0);
}

TEST_CASE("Megatron export carries a Llama model's shape flags, the rotary base only when it is not 10000",
          "[tuner][export]") {
  PlanFile pf;
  pf.model = load_transformer("llama-7b");
  pf.plan.tp = 8;
  pf.plan.micro_batch = 1;
  pf.plan.grad_accum = 1;
  pf.plan.global_batch = 1;
  auto has = [&](const std::vector<std::string>& args, const std::vector<std::string>& seq) {
    return std::search(args.begin(), args.end(), seq.begin(), seq.end()) != args.end();
  };
  auto args = megatron_arguments(pf, "plan.json");
  CHECK(has(args, {"--swiglu"}));
  CHECK(has(args, {"--normalization", "RMSNorm"}));
  CHECK(has(args, {"--position-embedding-type", "rope"}));
  CHECK(has(args, {"--disable-bias-linear"}));
  CHECK_FALSE(has(args, {"--add-qkv-bias"}));
  CHECK(has(args, {"--untie-embeddings-and-output-weights"}));
  pf.model->qkv_bias = true;  // Qwen2: Megatron-LM's --add-qkv-bias beside --disable-bias-linear
  CHECK(has(megatron_arguments(pf, "plan.json"), {"--disable-bias-linear"}));
  CHECK(has(megatron_arguments(pf, "plan.json"), {"--add-qkv-bias"}));
  pf.model->qkv_bias = false;
  CHECK_FALSE(has(args, {"--rotary-base"}));  // Llama 1/2's 10000 is Megatron-LM's default
  pf.model->rope_theta = 500000;               // Llama 3 (its config.json's rope_theta)
  pf.model->kv_heads = 8;
  args = megatron_arguments(pf, "plan.json");
  CHECK(has(args, {"--rotary-base", "500000"}));
  CHECK_FALSE(has(args, {"--rotary-percent"}));
  pf.model->rotary_fraction = 0.25;  // GPT-NeoX's rotary_pct
  CHECK(has(megatron_arguments(pf, "plan.json"), {"--rotary-percent", "0.25"}));
  // --norm-epsilon only when the model's ε is not Megatron-LM's default 1e-5:
  // the catalog's llama-7b is Llama 1, whose rms_norm_eps is 1e-6.
  CHECK(has(args, {"--norm-epsilon", "1e-06"}));
  pf.model->norm_eps = 1e-5;  // Llama 2's
  CHECK_FALSE(has(megatron_arguments(pf, "plan.json"), {"--norm-epsilon"}));
  pf.model->norm_eps = 0.5;
  CHECK(has(megatron_arguments(pf, "plan.json"), {"--norm-epsilon", "0.5"}));
  pf.model->norm_eps = 1e-5;
  // What Megatron-LM's GPT cannot express is refused, not dropped.
  pf.model->parallel_residual = true;
  CHECK_THROWS_WITH(megatron_arguments(pf, "plan.json"), StartsWith("plan.json: $.model.parallel_residual"));
  pf.model->parallel_residual = false;
  pf.model->position = PositionEmbedding::alibi;
  CHECK_THROWS_WITH(megatron_arguments(pf, "plan.json"), StartsWith("plan.json: $.model.position_embedding"));
  pf.model->position = PositionEmbedding::none;
  CHECK(has(megatron_arguments(pf, "plan.json"), {"--position-embedding-type", "none"}));
  CHECK(has(args, {"--group-query-attention", "--num-query-groups", "8"}));
}


// Uneven pipeline stages (issue 19). Megatron-LM states them by the end
// stages' layer counts (--decoder-first/last-pipeline-num-layers), the others
// equal; Megatron-DeepSpeed only balances (partition_method "type:transformer").
TEST_CASE("export of uneven stages: Megatron's first/last stage flags, DeepSpeed's balanced partition only",
          "[tuner][export][stages]") {
  PlanFile pf;
  pf.model = test::korthikanti_model(70, 14336, 112, 64);  // BLOOM-176B's 70 layers
  Plan& p = pf.plan;
  p.tp = 4;
  p.pp = 12;
  p.dp = 1;
  p.micro_batch = 1;
  p.grad_accum = 12;
  p.global_batch = 12;
  p.precision = Precision::bf16;
  auto has_pair = [](const std::vector<std::string>& a, const std::string& k, const std::string& v) {
    for (std::size_t i = 0; i + 1 < a.size(); ++i)
      if (a[i] == k && a[i + 1] == v) return true;
    return false;
  };
  auto has = [](const std::vector<std::string>& a, const std::string& k) {
    return std::find(a.begin(), a.end(), k) != a.end();
  };
  // Balanced 70 on 12 is 6 × 10 + 5 × 2: the middle stages differ, which
  // Megatron-LM cannot state; the reason names the stages.
  CHECK_THROWS_WITH(megatron_arguments(pf, "plan.json"),
                    Contains("plan.json: megatron cannot run this plan") &&
                        Contains("6+6+6+6+6+6+6+6+6+6+5+5") && Contains("--decoder-first/last-pipeline-num-layers"));
  // BLOOM's own: 5 on each end stage, 6 on the ten others (70 = 5 + 60 + 5).
  p.stage_layers = {5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5};
  auto a = megatron_arguments(pf, "plan.json");
  CHECK(has_pair(a, "--decoder-first-pipeline-num-layers", "5"));
  CHECK(has_pair(a, "--decoder-last-pipeline-num-layers", "5"));
  CHECK(has_pair(a, "--num-layers", "70"));
  // Only the first differs: one flag.
  p.stage_layers = {4, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6};
  a = megatron_arguments(pf, "plan.json");
  CHECK(has_pair(a, "--decoder-first-pipeline-num-layers", "4"));
  CHECK_FALSE(has(a, "--decoder-last-pipeline-num-layers"));
  // Uneven stages under interleaving: Megatron-Core takes the chunk count
  // (--num-virtual-stages-per-pipeline-rank) beside the end stages' layers,
  // not the equal chunks' size.
  p.stage_layers = {4, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6};
  p.schedule = Schedule::interleaved;
  p.virtual_stages = 2;
  p.grad_accum = 12;
  p.global_batch = static_cast<std::int64_t>(p.micro_batch) * p.grad_accum * p.dp;
  a = megatron_arguments(pf, "plan.json");
  CHECK(has_pair(a, "--num-virtual-stages-per-pipeline-rank", "2"));
  CHECK(has_pair(a, "--decoder-first-pipeline-num-layers", "4"));
  CHECK_FALSE(has(a, "--num-layers-per-virtual-pipeline-stage"));
  p.schedule = Schedule::one_f_one_b;
  p.virtual_stages = 1;
  // Equal stages: neither flag.
  pf.model->layers = 72;
  p.stage_layers.clear();
  a = megatron_arguments(pf, "plan.json");
  CHECK_FALSE(has(a, "--decoder-first-pipeline-num-layers"));
  CHECK_FALSE(has(a, "--decoder-last-pipeline-num-layers"));

  // DeepSpeed: the balanced partition is what Megatron-DeepSpeed runs.
  pf.model->layers = 70;
  p.zero_stage = 1;
  CHECK_NOTHROW(deepspeed_config(pf, "plan.json"));
  CHECK_THAT(deepspeed_launch(pf, "ds_config.json", "plan.json"), Contains("--num-layers 70"));
  p.stage_layers = {6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5, 5};  // the balanced one, stated
  CHECK_NOTHROW(deepspeed_config(pf, "plan.json"));
  p.stage_layers = {5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5};
  CHECK_THROWS_WITH(deepspeed_config(pf, "plan.json"),
                    Contains("plan.json: deepspeed cannot run this plan") && Contains("type:transformer") &&
                        Contains("at most 6 per stage"));
  CHECK_THROWS_WITH(deepspeed_launch(pf, "ds_config.json", "plan.json"), Contains("type:transformer"));
}

// Megatron-Core's accounting layout under a virtual pipeline (Plan::chunk_layers):
// exported as the flags that make it (--account-for-embedding/loss-in-pipeline-split
// with --num-virtual-stages-per-pipeline-rank; transformer_layer.py
// get_transformer_layer_offset), never as end-stage layer counts, which
// Megatron-Core would cut into equal chunks; another chunk layout is refused.
TEST_CASE("export of stated model chunks: Megatron-Core's accounting flags, other layouts refused",
          "[tuner][export][stages][chunks]") {
  PlanFile pf;
  pf.model = test::korthikanti_model(30, 4096, 32, 128);
  Plan& p = pf.plan;
  p.tp = 1;
  p.pp = 4;
  p.dp = 1;
  p.micro_batch = 1;
  p.grad_accum = 8;
  p.global_batch = 8;
  p.precision = Precision::bf16;
  p.schedule = Schedule::interleaved;
  p.virtual_stages = 8;
  // 30 + 2 = 32 over 4 × 8 chunks of one: the 405B's shape, both ends empty.
  p.chunk_layers = chunk_layers_accounting(30, 4, 8, true, true);
  p.stage_layers = stage_sums_of_chunks(p.chunk_layers, 4);
  auto has = [](const std::vector<std::string>& a, const std::string& k) {
    return std::find(a.begin(), a.end(), k) != a.end();
  };
  auto a = megatron_arguments(pf, "plan.json");
  const auto v = std::find(a.begin(), a.end(), "--num-virtual-stages-per-pipeline-rank");
  REQUIRE(v != a.end());
  CHECK(*(v + 1) == "8");
  CHECK((has(a, "--account-for-embedding-in-pipeline-split") && has(a, "--account-for-loss-in-pipeline-split")));
  CHECK_FALSE(has(a, "--decoder-first-pipeline-num-layers"));
  CHECK_FALSE(has(a, "--decoder-last-pipeline-num-layers"));
  CHECK_FALSE(has(a, "--num-layers-per-virtual-pipeline-stage"));
  // The embedding alone counted: 31 + 1 = 32, the first chunk empty, the last whole.
  pf.model->layers = 31;
  p.chunk_layers = chunk_layers_accounting(31, 4, 8, true, false);
  p.stage_layers = stage_sums_of_chunks(p.chunk_layers, 4);
  a = megatron_arguments(pf, "plan.json");
  CHECK(has(a, "--account-for-embedding-in-pipeline-split"));
  CHECK_FALSE(has(a, "--account-for-loss-in-pipeline-split"));
  // A first chunk longer than the others is no layout Megatron-LM states.
  p.chunk_layers.assign(32, 1);
  p.chunk_layers.front() = 2;
  p.chunk_layers.back() = 0;
  p.stage_layers = stage_sums_of_chunks(p.chunk_layers, 4);
  CHECK_THROWS_WITH(megatron_arguments(pf, "plan.json"),
                    Contains("plan.json: megatron cannot run this plan") && Contains("chunks:2+1×30+0") &&
                        Contains("its model chunks (chunks: above) are not a layout Megatron-LM states") &&
                        Contains("--account-for-embedding/loss-in-pipeline-split the first/last one layer short"));
  // Equal chunks stated are Megatron's own cut: 32 layers in chunks of one.
  pf.model->layers = 32;
  p.chunk_layers.assign(32, 1);
  p.stage_layers = stage_sums_of_chunks(p.chunk_layers, 4);
  a = megatron_arguments(pf, "plan.json");
  CHECK(std::find(a.begin(), a.end(), "--num-layers-per-virtual-pipeline-stage") != a.end());
  CHECK_FALSE(has(a, "--account-for-embedding-in-pipeline-split"));
  // DeepSpeed's pipeline has no virtual stages at all.
  p.zero_stage = 1;
  CHECK_THROWS(deepspeed_config(pf, "plan.json"));
}

// ZeRO-R Pa as each engine spells it: DeepSpeed's ds_config
// activation_checkpointing.partition_activations (and Megatron-DeepSpeed's
// --partition-activations, which it hands to deepspeed.checkpointing.configure),
// Megatron-LM's --distribute-saved-activations; FSDP/torchtitan have none.
TEST_CASE("partitioned activations export as DeepSpeed and Megatron-LM spell them, FSDP refuses them",
          "[tuner][export][pa]") {
  PlanFile pf;
  pf.model = test::korthikanti_model(24, 2048, 16, 64);
  pf.cluster = load_cluster("dgx-a100-80gb");
  Plan& p = pf.plan;
  p.tp = 8;
  p.micro_batch = 4;
  p.global_batch = 4;
  p.recompute = Recompute::full;
  // Full recomputation without Pa: the checkpoints stay whole.
  CHECK(deepspeed_config(pf, "plan.json")["activation_checkpointing"]["partition_activations"] == false);
  CHECK_THAT(deepspeed_launch(pf, "ds_config.json", "plan.json"), !Contains("--partition-activations"));
  p.partition_activations = true;
  CHECK(deepspeed_config(pf, "plan.json")["activation_checkpointing"]["partition_activations"] == true);
  CHECK_THAT(deepspeed_launch(pf, "ds_config.json", "plan.json"), Contains(" --partition-activations "));
  const auto mg = megatron_arguments(pf, "plan.json");
  CHECK(std::count(mg.begin(), mg.end(), "--distribute-saved-activations") == 1);
  CHECK(std::count(mg.begin(), mg.end(), "--sequence-parallel") == 0);
  REQUIRE(engine_violation(p, Engine::fsdp).has_value());
  CHECK(*engine_violation(p, Engine::fsdp) == EngineRule::fs_partition_activations);
  CHECK(*engine_violation(p, Engine::ztune) == EngineRule::zt_partition_activations);
}

// ZeRO-R CPU checkpointing as DeepSpeed spells it: ds_config
// activation_checkpointing.cpu_checkpointing and Megatron-DeepSpeed's
// --checkpoint-in-cpu (arguments.py: "Move the activation checkpoints to
// CPU."); Megatron-LM, torchtitan and ztune's executor refuse it.
TEST_CASE("CPU checkpointing exports as DeepSpeed spells it, the other engines refuse it", "[tuner][export][offload]") {
  PlanFile pf = dp8_plan(3);
  Plan& p = pf.plan;
  p.recompute = Recompute::full;
  CHECK(deepspeed_config(pf, "plan.json")["activation_checkpointing"]["cpu_checkpointing"] == false);
  CHECK_THAT(deepspeed_launch(pf, "ds_config.json", "plan.json"), !Contains("--checkpoint-in-cpu"));
  p.cpu_checkpointing = true;
  CHECK(deepspeed_config(pf, "plan.json")["activation_checkpointing"]["cpu_checkpointing"] == true);
  CHECK_THAT(deepspeed_launch(pf, "ds_config.json", "plan.json"), Contains(" --checkpoint-in-cpu"));
  CHECK_FALSE(engine_violation(p, Engine::deepspeed).has_value());
  p.zero_stage = 1;
  CHECK(*engine_violation(p, Engine::megatron) == EngineRule::mg_cpu_checkpointing);
  p.zero_stage = 3;
  CHECK(*engine_violation(p, Engine::fsdp) == EngineRule::fs_cpu_checkpointing);
  CHECK(*engine_violation(p, Engine::ztune) == EngineRule::zt_cpu_checkpointing);
  CHECK_THAT(std::string(engine_rule_text(EngineRule::zt_cpu_checkpointing)), Contains("--engine deepspeed"));
}

// Context parallelism (issue 19): Megatron-Core's --context-parallel-size;
// DeepSpeed has none, and Megatron-Core rings only its fused attention.
TEST_CASE("export of context parallelism: Megatron's --context-parallel-size, refused for DeepSpeed",
          "[tuner][export][cp]") {
  PlanFile pf;
  Plan& p = pf.plan;
  p.tp = 4;
  p.pp = 1;
  p.cp = 2;
  p.dp = 8;
  p.zero_stage = 1;
  p.micro_batch = 1;
  p.grad_accum = 16;
  p.global_batch = 128;
  p.sequence_parallel = true;
  p.attention = AttentionKernel::flash;
  pf.cluster = load_cluster("dgx-h100x32");
  pf.model = load_transformer("llama-70b");
  const auto a = megatron_arguments(pf, "cp.json");
  const auto at = std::find(a.begin(), a.end(), "--context-parallel-size");
  REQUIRE(at != a.end());
  CHECK(*(at + 1) == "2");
  CHECK(std::find(a.begin(), a.end(), "--use-distributed-optimizer") != a.end());
  // Eight nodes of 8: tp 4 × cp 2 × dp 8 = 64 GPUs.
  CHECK_THAT(megatron_launch(pf, "cp.json"), Contains("--nnodes 8 --nproc_per_node 8"));
  CHECK_THROWS_WITH(deepspeed_config(pf, "cp.json"),
                    Contains("cp.json: deepspeed cannot run this plan") && Contains("no context parallelism"));
  CHECK_THROWS_WITH(deepspeed_launch(pf, "ds.json", "cp.json"), Contains("no context parallelism"));
  // Without cp nothing changes.
  p.cp = 1;
  p.dp = 16;
  p.grad_accum = 8;
  const auto b = megatron_arguments(pf, "cp.json");
  CHECK(std::find(b.begin(), b.end(), "--context-parallel-size") == b.end());
  // Megatron-Core's unfused attention has no ring.
  p.cp = 2;
  p.dp = 8;
  p.grad_accum = 16;
  p.attention = AttentionKernel::standard;
  CHECK_THROWS_WITH(megatron_arguments(pf, "cp.json"),
                    Contains("megatron cannot run this plan") && Contains("fused attention"));
}

// Issue 23: the launch starts exactly the plan's ranks, placed as the cost
// model placed them: whole nodes in order, the remainder on the last node,
// every node's count a multiple of tp (Megatron-LM and Megatron-DeepSpeed
// number the tensor-parallel ranks next to each other).
TEST_CASE("export launches exactly the plan's ranks, tp groups inside a node", "[tuner][export]") {
  PlanFile pf;
  pf.cluster = load_cluster("dgx2x16");  // 16 nodes of 16 V100
  pf.model = load_transformer("100b");
  Plan& p = pf.plan;
  p.tp = 8;
  p.pp = 5;
  p.dp = 6;  // 240 devices: 15 nodes of 16
  p.micro_batch = 1;
  p.global_batch = 6;
  p.grad_accum = 1;
  p.precision = Precision::fp16;
  LaunchShape s = launch_shape(pf, "p.json");
  CHECK(s.nodes == 15);
  CHECK(s.per_node == 16);
  CHECK(s.uniform());
  CHECK_THAT(megatron_launch(pf, "p.json"), Contains("torchrun --nnodes 15 --nproc_per_node 16 --rdzv_backend c10d"));
  // 200 devices at tp 8: 12 nodes of 16 and one of 8.
  p.dp = 5;
  p.global_batch = 5;
  s = launch_shape(pf, "p.json");
  CHECK(s.nodes == 13);
  CHECK(s.per_node == 16);
  CHECK(s.last_node == 8);
  CHECK(s.ranks() == 200);
  // The issue's dp1×tp2×pp125: 250 ranks, 15 nodes of 16 and one of 10.
  p.tp = 2;
  p.pp = 125;
  p.dp = 1;
  p.global_batch = 1;
  s = launch_shape(pf, "p.json");
  CHECK(s.nodes == 16);
  CHECK(s.last_node == 10);
  CHECK(s.ranks() == 250);
  const std::string torchrun = megatron_launch(pf, "p.json");
  CHECK_THAT(torchrun, Contains("torchrun --nnodes 16 --node_rank $NODE_RANK --nproc_per_node "
                                "$([ \"$NODE_RANK\" -lt 15 ] && echo 16 || echo 10) --master_addr $MASTER_ADDR"));
  const std::string ds = deepspeed_launch(pf, "ds.json", "p.json");
  CHECK_THAT(ds, StartsWith("deepspeed --hostfile hostfile --num_nodes 16 pretrain_gpt.py"));
  CHECK_THAT(ds, !Contains("--num_gpus"));
  const auto ds_set = launch_placeholders(pf, Engine::deepspeed, "p.json");
  REQUIRE(ds_set.size() == 4);  // the hostfile, then the tokenizer, data and schedule
  CHECK_THAT(ds_set[0], Contains("the first 15 '<host> slots=16' and the last '<host> slots=10'") &&
                            Contains("250 ranks"));
  const auto tr_set = launch_placeholders(pf, Engine::megatron, "p.json");
  REQUIRE(tr_set.size() == 4);
  CHECK_THAT(tr_set[0], Contains("NODE_RANK: 0 to 15") && Contains("node 15 starts 10 ranks, the others 16"));
  // Under Slurm: one torchrun per node, NODE_RANK from the node's id.
  CHECK_THAT(srun_launch(pf, torchrun, "p.json"),
             StartsWith("srun --nodes 16 --ntasks-per-node 1 bash -c 'export NODE_RANK=$SLURM_NODEID MASTER_ADDR=") &&
                 EndsWith(torchrun + "'"));
  CHECK_THAT(deepspeed_torchrun_launch(pf, "ds.json", "p.json"),
             StartsWith("torchrun --nnodes 16 --node_rank $NODE_RANK") && Contains(" pretrain_gpt.py ") &&
                 Contains("--deepspeed_config ds.json"));
  // 100 at tp 2: 6 nodes of 16 and one of 4.
  p.pp = 50;
  s = launch_shape(pf, "p.json");
  CHECK(s.nodes == 7);
  CHECK(s.ranks() == 100);
  // tp 3 does not divide a node of 16: the same count on every node, a
  // multiple of 3 (48 = 4 nodes of 12); 3 × 41 has none on 16 nodes.
  p.tp = 3;
  p.pp = 16;
  s = launch_shape(pf, "p.json");
  CHECK((s.nodes == 4 && s.per_node == 12 && s.uniform()));
  p.pp = 41;
  CHECK_THROWS_WITH(launch_shape(pf, "p.json"),
                    Contains("p.json: the plan's 123 devices") && Contains("at most 16 nodes of 16 GPUs") &&
                        Contains("tensor-parallel group of 3"));
  // One node: no rendezvous, no hostfile, nothing left to set.
  p.tp = 2;
  p.pp = 4;
  p.dp = 2;
  p.global_batch = 2;
  CHECK_THAT(megatron_launch(pf, "p.json"), StartsWith("CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun --nnodes 1 --nproc_per_node 16 pretrain_gpt.py"));
  // One node: no rendezvous or hostfile, only what pretrain_gpt.py leaves to the user.
  const auto one = launch_placeholders(pf, Engine::megatron, "p.json");
  REQUIRE(one.size() == 3);
  CHECK_THAT(one[0], StartsWith("tokenizer: --tokenizer-type"));
  CHECK_THAT(one[1], StartsWith("data: --data-path PREFIX") && Contains("--mock-data"));
  // --train-iters: the model's train_tokens over global batch × sequence, rounded up,
  // as it is typed (argparse refuses "146,484,375").
  const double steps = std::ceil(pf.model->train_tokens / (2.0 * pf.model->seq_len));
  CHECK_THAT(one[2], StartsWith("schedule: --lr and --train-iters " + std::to_string(static_cast<long long>(steps)) + " "));
  // Several nodes: the hostfile (deepspeed) or MASTER_ADDR (torchrun) is named.
  p.dp = 4;
  p.global_batch = 4;
  const auto two = launch_placeholders(pf, Engine::deepspeed, "p.json");
  REQUIRE(two.size() == 4);
  CHECK_THAT(two[0], Contains("hostfile: 2 lines '<host> slots=16'"));
  CHECK_THAT(launch_placeholders(pf, Engine::megatron, "p.json")[0], Contains("MASTER_ADDR"));
  // A plan file without its cluster and model (docs/formats.md allows it): the
  // command starts every rank (2 × 4 × 4) as one node and names no model, and says so first.
  PlanFile bare;
  bare.plan = p;
  const auto set = launch_placeholders(bare, Engine::megatron, "p.json");
  REQUIRE(set.size() >= 2);
  CHECK_THAT(set[0], StartsWith("the node shape: p.json has no $.cluster, so the command starts all 32 ranks as one "
                                "node"));
  CHECK_THAT(set[1], StartsWith("the model: p.json has no $.model"));
}

// The ragged launch's one command, run by a real shell as each node would:
// the counts it starts add up to the plan's ranks (the oracle is sh itself).
TEST_CASE("a ragged torchrun launch starts the plan's ranks when the shell runs it", "[tuner][export]") {
  PlanFile pf;
  pf.cluster = load_cluster("dgx2x16");
  pf.model = load_transformer("100b");
  Plan& p = pf.plan;
  p.tp = 2;
  p.pp = 125;
  p.dp = 1;
  p.micro_batch = 1;
  p.global_batch = 1;
  p.grad_accum = 1;
  p.precision = Precision::fp16;
  const std::string cmd = torchrun_command(pf, "p.json");
  const auto at = cmd.find("$([");
  REQUIRE(at != std::string::npos);
  const std::string expr = cmd.substr(at, cmd.find(')', at) - at + 1);
  int total = 0;
  for (int node = 0; node < 16; ++node) {
    const std::string sh = "NODE_RANK=" + std::to_string(node) + "; echo " + expr;
    FILE* f = popen(("sh -c '" + sh + "'").c_str(), "r");
    REQUIRE(f != nullptr);
    int n = 0;
    REQUIRE(std::fscanf(f, "%d", &n) == 1);
    pclose(f);
    CHECK(n % p.tp == 0);
    total += n;
  }
  CHECK(total == 250);
}

// DeepSpeed-Ulysses (issue 19 item 3): Megatron-DeepSpeed's
// --ds-sequence-parallel-size; Megatron-LM and FSDP refuse it.
TEST_CASE("export of Ulysses: Megatron-DeepSpeed's --ds-sequence-parallel-size, refused for megatron and fsdp",
          "[tuner][export][ulysses]") {
  PlanFile pf;
  Plan& p = pf.plan;
  p.tp = 2;
  p.pp = 1;
  p.ulysses = 4;
  p.dp = 8;
  p.zero_stage = 3;
  p.micro_batch = 1;
  p.grad_accum = 16;
  p.global_batch = 128;
  p.attention = AttentionKernel::flash;
  pf.cluster = load_cluster("dgx-h100x32");
  pf.model = load_transformer("llama-70b");
  const std::string launch = deepspeed_launch(pf, "ds.json", "u.json");
  CHECK_THAT(launch, Contains("--ds-sequence-parallel-size 4"));
  CHECK_THAT(launch, Contains("--tensor-model-parallel-size 2"));
  CHECK_THAT(launch, Contains("--deepspeed"));
  CHECK_THAT(launch, !Contains("--sequence-parallel "));
  // Eight nodes of 8: tp 2 × u 4 × dp 8 = 64 GPUs.
  CHECK_THAT(launch, Contains("--num_nodes 8 --num_gpus 8"));
  // ds_config: the batch is micro × accumulation × dp (DeepSpeed divides the world by the sequence-parallel size).
  const auto ds = deepspeed_config(pf, "u.json");
  CHECK(ds["train_batch_size"] == 128);
  CHECK(ds["zero_optimization"]["stage"] == 3);
  p.zero_stage = 1;  // so that Ulysses is the only thing Megatron-LM lacks
  CHECK_THROWS_WITH(megatron_arguments(pf, "u.json"),
                    Contains("u.json: megatron cannot run this plan") && Contains("DeepSpeed-Ulysses"));
  CHECK_THAT(deepspeed_launch(pf, "ds.json", "u.json"), Contains("--ds-sequence-parallel-size 4"));
  // Without Ulysses nothing changes.
  p.ulysses = 1;
  p.dp = 32;
  p.grad_accum = 4;
  CHECK_THAT(deepspeed_launch(pf, "ds.json", "u.json"), !Contains("--ds-sequence-parallel-size"));
}

TEST_CASE("export of hybrid sharding is refused for DeepSpeed (MiCS) and Megatron-LM, naming why",
          "[tuner][export][hsdp]") {
  // DeepSpeed's MiCS had been exported as mics_shard_size: it shards only
  // parameters built under deepspeed.zero.MiCS_Init (runtime/zero/mics.py
  // asserts it), which Megatron-DeepSpeed's pretrain_gpt.py does not use, and
  // DeepSpeed 0.19 removed it (an export audit against both versions).
  PlanFile pf;
  Plan& p = pf.plan;
  p.dp = 64;
  p.zero_stage = 3;
  p.dp_shard = 8;
  p.micro_batch = 1;
  p.grad_accum = 2;
  p.global_batch = 128;
  pf.cluster = load_cluster("dgx-h100x32");
  pf.model = load_transformer("llama-7b");
  CHECK_THROWS_WITH(deepspeed_config(pf, "hsdp.json"),
                    Contains("hsdp.json: deepspeed cannot run this plan") && Contains("MiCS_Init") &&
                        Contains("--engine fsdp (HSDP)"));
  CHECK_THROWS_WITH(deepspeed_launch(pf, "ds_config.json", "hsdp.json"), Contains("MiCS_Init"));
  CHECK_THROWS_WITH(megatron_arguments(pf, "hsdp.json"),
                    Contains("hsdp.json: megatron cannot run this plan") && Contains("no ZeRO-3 sharded inside groups"));
  // ZeRO-3 over the whole data-parallel group: as before.
  p.dp_shard = 0;
  const auto z = deepspeed_config(pf, "hsdp.json")["zero_optimization"];
  CHECK(z["stage"] == 3);
  CHECK_FALSE(z.contains("mics_shard_size"));
}

TEST_CASE("DeepSpeed export refuses ZeRO++ beside tensor or pipeline parallelism, and gives 1-bit Adam no launch",
          "[tuner][export]") {
  PlanFile pf = zero2_offload_plan();
  Plan& p = pf.plan;
  p.offload_optimizer = OffloadTarget::none;
  p.zero_stage = 3;
  p.zeropp = true;
  // hpZ's and qgZ's groups are consecutive world ranks (utils/groups.py,
  // comm/coalesced_collectives.py): beside tp they mix tensor shards.
  p.dp = 8;
  p.tp = 2;
  p.grad_accum = 16;
  CHECK_THROWS_WITH(deepspeed_config(pf, "zpp.json"),
                    Contains("zpp.json: deepspeed cannot run this plan") && Contains("consecutive world ranks"));
  p.dp = 16;
  p.tp = 1;
  p.grad_accum = 8;
  CHECK(deepspeed_config(pf, "zpp.json")["zero_optimization"]["zero_hpz_partition_size"] == 16);
  CHECK_FALSE(deepspeed_launch_refusal(p).has_value());
  // 1-bit Adam: the config holds DeepSpeed's OneBitAdam, but Megatron-DeepSpeed
  // passes deepspeed.initialize its own Adam, which overrides it: no launch.
  p.zeropp = false;
  p.zero_stage = 0;
  p.onebit_adam = true;
  CHECK(deepspeed_config(pf, "ob.json")["optimizer"]["type"] == "OneBitAdam");
  const auto why = deepspeed_launch_refusal(p);
  REQUIRE(why.has_value());
  CHECK_THAT(*why, Contains("client optimizer overrides the config's OneBitAdam") && Contains("0.18 or earlier"));
}

namespace {

// torchtitan's Llama 3 8B flavor: 32 layers of 4096, 8 KV heads, FFN 14336.
Transformer llama3_8b() {
  Transformer m = load_transformer("llama-7b");
  m.layers = 32;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 8;
  m.ffn_hidden = 14336;
  m.vocab = 128256;  // Llama 3's tokenizer
  m.rope_theta = 500000;
  return m;
}

}  // namespace

// torchtitan's job TOML (the fsdp engine): the degrees multiply to the plan's
// devices as torchtitan's ParallelDims requires (replicate × shard × cp × tp ×
// pp = world size), hybrid sharding is replicate × shard, and what torchtitan's
// Llama 3 trainer cannot run is refused naming the field. Oracle: the plan's
// own degrees, and torchtitan's flavors (8B: 32 × 4096, 8 KV heads, FFN 14336,
// Llama 3's 128,256-id tokenizer and rope_theta 500,000; Llama 2 70B's shape is
// the 70B's, its vocabulary and rope_theta are not).
TEST_CASE("torchtitan export: degrees multiply to the plan's devices, refusals name the field",
          "[tuner][export][torchtitan]") {
  using Catch::Matchers::Contains;
  PlanFile pf;
  const Transformer m = llama3_8b();
  pf.model = m;
  pf.cluster = load_cluster("dgx-h100x32");
  Plan& p = pf.plan;
  p.dp = 32;
  p.tp = 2;
  p.sequence_parallel = true;
  p.zero_stage = 3;
  p.dp_shard = 8;
  p.micro_batch = 2;
  p.grad_accum = 4;
  p.global_batch = 256;
  p.precision = Precision::bf16;
  p.recompute = Recompute::full;
  const std::string toml = torchtitan_config(pf, "plan.json");
  CHECK_THAT(toml, Contains("flavor = \"8B\""));
  // The release whose fields these are (0.2 renamed some, 0.3 reads no TOML): said in the file.
  CHECK_THAT(toml, Contains("# written for torchtitan 0.1.0 (pip install torchtitan==0.1.0)"));
  {
    PlanFile llama2 = pf;
    llama2.model = load_transformer("llama-70b");  // 80 × 8192, 8 KV heads, FFN 28672: the 70B flavor's shape
    CHECK_THAT(torchtitan_config(llama2, "plan.json"), Contains("flavor = \"llama-70b\""));
  }
  CHECK_THAT(toml, Contains("data_parallel_replicate_degree = 4\n") && Contains("data_parallel_shard_degree = 8\n") &&
                       Contains("tensor_parallel_degree = 2\n") && Contains("pipeline_parallel_degree = 1\n"));
  CHECK_THAT(toml, Contains("local_batch_size = 2\n") && Contains("global_batch_size = 256\n"));
  CHECK_THAT(toml, Contains("fsdp_reshard_after_forward = \"always\"") && Contains("mode = \"full\""));
  CHECK_THAT(torchtitan_launch(pf, "job.toml", "plan.json"),
             Contains("--nnodes 8 --nproc_per_node 8") && Contains("-m torchtitan.train --job.config_file job.toml"));
  {
    // Uneven interleaved stages: the split points are the virtual stages' first
    // layers in pipeline order. 32 layers as 10 + 6 + 6 + 10 on 4 stages × 2
    // chunks: rounds of 16 layers, stage r giving 5, 3, 3, 5 to each.
    PlanFile q = pf;
    Plan& ip = q.plan;
    ip.dp = 8;
    ip.dp_shard = 0;
    ip.pp = 4;
    ip.virtual_stages = 2;
    ip.schedule = Schedule::interleaved;
    ip.stage_layers = {10, 6, 6, 10};
    ip.micro_batch = 1;
    ip.grad_accum = 32;
    ip.global_batch = 256;
    CHECK_THAT(torchtitan_config(q, "plan.json"),
               Contains("pipeline_parallel_split_points = [\"layers.5\", \"layers.8\", \"layers.11\", "
                        "\"layers.16\", \"layers.21\", \"layers.24\", \"layers.27\"]"));
    {
      // Stated model chunks (Plan::chunk_layers, pipeline order): 3 + 4 + 4 + 4
      // then 4 + 4 + 4 + 5 begin at layers 3, 7, 11, 15, 19, 23, 27; a chunk of
      // none (Megatron-Core's embedding or loss alone) has no layer to name.
      PlanFile k = q;
      k.plan.chunk_layers = {3, 4, 4, 4, 4, 4, 4, 5};
      k.plan.stage_layers = stage_sums_of_chunks(k.plan.chunk_layers, 4);
      REQUIRE_FALSE(check_plan(k.plan, *k.model, *k.cluster).has_value());
      CHECK_THAT(torchtitan_config(k, "plan.json"),
                 Contains("pipeline_parallel_split_points = [\"layers.3\", \"layers.7\", \"layers.11\", "
                          "\"layers.15\", \"layers.19\", \"layers.23\", \"layers.27\"]"));
      k.plan.chunk_layers = {0, 4, 4, 4, 5, 4, 4, 7};  // not a shape check_plan admits; the export refuses it alone
      CHECK_THROWS_WITH(torchtitan_config(k, "plan.json"),
                        Contains("plan.json: $.plan.chunk_layers: torchtitan's split points name the layer each "
                                 "stage begins at, and this plan has a model chunk of no layers"));
    }
    // ZeRO-3 under the pipeline is torchtitan's "default" resharding policy,
    // which keeps the gathered stage through the step when pp > 1 (apply_fsdp:
    // reshard_after_forward = not pp_enabled), what ztune prices for it.
    // Hybrid sharding with context parallelism: torchtitan shards over its
    // data_parallel_shard_degree × cp ranks, so ztune's shard group of 4 of
    // the dp × cp = 16 ranks is shard degree 2 beside cp 2, and 4 replicas.
    {
      PlanFile h = q;
      h.plan.cp = 2;
      h.plan.attention = AttentionKernel::flash;  // torchtitan's ring runs SDPA's flash kernels
      h.plan.dp_shard = 4;
      h.plan.grad_accum = 32;
      h.plan.global_batch = 256;
      REQUIRE_FALSE(check_plan(h.plan, *h.model, *h.cluster).has_value());
      CHECK_THAT(torchtitan_config(h, "plan.json"),
                 Contains("data_parallel_replicate_degree = 4\n") && Contains("data_parallel_shard_degree = 2\n") &&
                     Contains("context_parallel_degree = 2\n"));
      h.plan.cp = 4;  // dp × cp = 32, shard groups of 2: fewer ranks than cp
      h.plan.dp_shard = 2;
      REQUIRE_FALSE(check_plan(h.plan, *h.model, *h.cluster).has_value());
      CHECK_THROWS_WITH(torchtitan_config(h, "plan.json"),
                        Contains("plan.json: $.plan.dp_shard") && Contains("not a multiple of cp 4"));
    }
    REQUIRE(ip.zero3_held_through_step());
    CHECK_FALSE(check_plan(ip, *q.model, *q.cluster).has_value());
    CHECK_THAT(torchtitan_config(q, "plan.json"),
               Contains("fsdp_reshard_after_forward = \"default\"\n") &&
                   Contains("data_parallel_shard_degree = 8\n") && Contains("pipeline_parallel_degree = 4\n"));
  }
  // Not one of torchtitan's flavors: written under its name, listed to register.
  pf.model->layers = 30;
  CHECK_THAT(torchtitan_config(pf, "plan.json"), Contains("flavor = \"" + m.name + "\""));
  bool listed = false, vocab_said = false;
  for (const auto& line : torchtitan_placeholders(pf, "plan.json")) {
    listed |= line.find("n_layers=30") != std::string::npos;
    // torchtitan sets vocab_size from the tokenizer: registering one had no effect.
    vocab_said |= line.find("vocab_size=") == std::string::npos &&
                  line.find("its vocabulary is the tokenizer's") != std::string::npos;
  }
  CHECK(listed);
  CHECK(vocab_said);
  pf.model->layers = 32;
  // Refusals.
  p.sequence_parallel = false;
  CHECK_THROWS_WITH(torchtitan_config(pf, "plan.json"), Contains("plan.json: $.plan.sequence_parallel"));
  p.sequence_parallel = true;
  p.precision = Precision::fp16;
  CHECK_THROWS_WITH(torchtitan_config(pf, "plan.json"), Contains("$.plan.precision") && Contains("bf16"));
  p.precision = Precision::bf16;
  // torchtitan reduces in fp32 (mixed_precision_reduce accepts only "float32"):
  // a plan stating it exports, one stating bf16 is refused with the reason.
  const auto says_priced_bf16 = [&] {
    bool said = false;
    for (const auto& line : torchtitan_placeholders(pf, "plan.json"))
      said |= line.find("grad_reduce_dtype \"fp32\"") != std::string::npos;
    return said;
  };
  CHECK(says_priced_bf16());  // unstated: priced as FSDP's bf16 reduction, and the placeholders say so
  p.grad_reduce_dtype = Precision::fp32;
  CHECK_THAT(torchtitan_config(pf, "plan.json"), Contains("mixed_precision_reduce = \"float32\""));
  CHECK_FALSE(says_priced_bf16());
  p.grad_reduce_dtype = Precision::bf16;
  CHECK_THROWS_WITH(torchtitan_config(pf, "plan.json"),
                    Contains("plan.json: $.plan.communication.grad_reduce_dtype") && Contains("\"float32\""));
  p.grad_reduce_dtype.reset();
  pf.model = load_transformer("gpt2-1.5b");
  CHECK_THROWS_WITH(torchtitan_config(pf, "plan.json"), Contains("$.model.activation") && Contains("Llama 3"));
  pf.model = m;
  p.zero_stage = 1;  // FSDP has no ZeRO-1: the engine's own rule
  p.dp_shard = 0;
  CHECK_THROWS_WITH(torchtitan_config(pf, "plan.json"), Contains("plan.json") && Contains("ZeRO-1"));
}

// DeepSpeed's zero_optimization.reduce_scatter as the plan says; the engines
// whose ZeRO reduce-scatters refuse the all-reduce variant.
TEST_CASE("gradient all-reduce exports as DeepSpeed's reduce_scatter false, the other engines refuse it",
          "[tuner][export][zero]") {
  PlanFile pf = dp8_plan(1);
  Plan& p = pf.plan;
  CHECK(deepspeed_config(pf, "plan.json")["zero_optimization"]["reduce_scatter"] == true);
  p.reduce_scatter = false;
  CHECK(deepspeed_config(pf, "plan.json")["zero_optimization"]["reduce_scatter"] == false);
  CHECK_FALSE(engine_violation(p, Engine::deepspeed).has_value());
  CHECK(*engine_violation(p, Engine::megatron) == EngineRule::mg_grad_allreduce);
  CHECK(*engine_violation(p, Engine::ztune) == EngineRule::zt_grad_allreduce);
  p.zero_stage = 2;
  CHECK(*engine_violation(p, Engine::fsdp) == EngineRule::fs_grad_allreduce);
}

// The engines' own selective policies: torchtitan exports its op-level and
// every-second-block checkpointing as activation_checkpoint.selective_ac_option
// "op" and "2" (its JobConfig's spellings: tests/tuner/fixtures), refuses
// MaxText's; Megatron-LM, DeepSpeed and ztune's executor recompute the
// attention core only and refuse the others by rule.
TEST_CASE("selective policies export as torchtitan spells them, the engines that lack them refuse",
          "[tuner][export][recompute]") {
  using Catch::Matchers::Contains;
  PlanFile pf;
  const Transformer m = llama3_8b();
  pf.model = m;
  pf.cluster = load_cluster("dgx-h100");
  Plan& p = pf.plan;
  p.dp = 8;
  p.zero_stage = 3;
  p.micro_batch = 1;
  p.global_batch = 8;
  p.precision = Precision::bf16;
  p.attention = AttentionKernel::flash;
  p.recompute = Recompute::selective;
  p.recompute_policy = SelectivePolicy::alternate_mm;
  CHECK_THAT(torchtitan_config(pf, "plan.json"), Contains("mode = \"selective\"\nselective_ac_option = \"op\"\n"));
  p.recompute_policy = SelectivePolicy::alternate_layers;
  CHECK_THAT(torchtitan_config(pf, "plan.json"), Contains("mode = \"selective\"\nselective_ac_option = \"2\"\n"));
  p.recompute_every = 3;  // torchtitan's "k": every k-th block
  CHECK_THAT(torchtitan_config(pf, "plan.json"), Contains("mode = \"selective\"\nselective_ac_option = \"3\"\n"));
  p.recompute_every = 2;
  p.recompute_policy = SelectivePolicy::mlp_in;
  CHECK_THROWS_WITH(torchtitan_config(pf, "plan.json"),
                    Contains("plan.json: $.plan.recompute_policy") && Contains("MaxText"));
  p.recompute_policy = SelectivePolicy::dots;
  CHECK_THROWS_WITH(torchtitan_config(pf, "plan.json"),
                    Contains("plan.json: $.plan.recompute_policy") && Contains("SAVE_DOT_ONLY"));
  for (const auto policy : {SelectivePolicy::alternate_mm, SelectivePolicy::mlp_in, SelectivePolicy::alternate_layers,
                            SelectivePolicy::dots}) {
    p.recompute_policy = policy;
    p.zero_stage = 3;
    CHECK_FALSE(engine_violation(p, Engine::fsdp).has_value());
    CHECK(*engine_violation(p, Engine::deepspeed) == EngineRule::ds_recompute_policy);
    CHECK(*engine_violation(p, Engine::ztune) == EngineRule::zt_recompute_policy);
    p.zero_stage = 1;  // Megatron's distributed optimizer
    CHECK(*engine_violation(p, Engine::megatron) == EngineRule::mg_recompute_policy);
  }
  p.recompute_policy = SelectivePolicy::alternate_mm;
  CHECK_THROWS_WITH(megatron_arguments(pf, "plan.json"), Contains("megatron cannot run this plan"));
  // Korthikanti's attention core is every engine's.
  p.recompute_policy = SelectivePolicy::attention;
  CHECK_FALSE(engine_violation(p, Engine::megatron).has_value());
}

TEST_CASE("16-bit optimizer states export as Megatron-Core's precision-aware optimizer, and other engines refuse them",
          "[tuner][export][optimizer]") {
  // Expected arguments written by hand from Megatron-LM's arguments.py and
  // OptimizerConfig: --use-precision-aware-optimizer, --main-params-dtype
  // fp32|fp16, --exp-avg-dtype and --exp-avg-sq-dtype, store_param_remainders
  // true by default (--no-store-param-remainders).
  PlanFile pf = dense_plan_on("dgx-a100-80gb", AttentionKernel::flash);
  pf.plan.precision = Precision::bf16;
  pf.plan.zero_stage = 1;
  const auto args = [&] { return megatron_arguments(pf, "plan.json"); };
  const auto after = [](const std::vector<std::string>& a, const std::string& flag) -> std::string {
    const auto it = std::find(a.begin(), a.end(), flag);
    return it == a.end() || it + 1 == a.end() ? std::string("(absent)") : *(it + 1);
  };
  auto a = args();
  CHECK(std::count(a.begin(), a.end(), "--use-precision-aware-optimizer") == 0);  // fp32 states: Megatron's own
  // DeepSeek-V3's states: fp32 masters kept whole, bf16 moments.
  pf.plan.moments_dtype = Precision::bf16;
  a = args();
  CHECK(std::count(a.begin(), a.end(), "--use-precision-aware-optimizer") == 1);
  CHECK(after(a, "--exp-avg-dtype") == "bf16");
  CHECK(after(a, "--exp-avg-sq-dtype") == "bf16");
  CHECK(std::count(a.begin(), a.end(), "--main-params-dtype") == 0);
  CHECK(std::count(a.begin(), a.end(), "--no-store-param-remainders") == 1);
  CHECK(std::count(a.begin(), a.end(), "--use-distributed-optimizer") == 1);
  // The same masters as remainders: Megatron-Core's default, no switch.
  pf.plan.param_remainders = true;
  a = args();
  CHECK(std::count(a.begin(), a.end(), "--no-store-param-remainders") == 0);
  CHECK(std::count(a.begin(), a.end(), "--use-precision-aware-optimizer") == 1);
  // fp16 masters beside bf16 parameters.
  pf.plan.param_remainders = false;
  pf.plan.master_dtype = Precision::fp16;
  pf.plan.moments_dtype = Precision::fp16;
  a = args();
  CHECK(after(a, "--main-params-dtype") == "fp16");
  CHECK(after(a, "--exp-avg-dtype") == "fp16");
  CHECK(std::count(a.begin(), a.end(), "--no-store-param-remainders") == 0);
  // A bf16 master is NeMo's Apex optimizer, not Megatron-LM's.
  pf.plan.master_dtype = Precision::bf16;
  REQUIRE_THROWS_WITH(args(), Contains("plan.json: $.plan.optimizer.master_dtype") && Contains("fp32 or fp16"));
  pf.plan.master_dtype = Precision::fp16;
  pf.plan.zero_stage = 0;
  REQUIRE_THROWS_WITH(args(), Contains("plan.json: $.plan.zero_stage") && Contains("--use-distributed-optimizer"));
  pf.plan.zero_stage = 1;
  CHECK_FALSE(engine_violation(pf.plan, Engine::megatron).has_value());
  CHECK(engine_violation(pf.plan, Engine::deepspeed) == EngineRule::ds_optimizer_dtype);
  // ztune's executor keeps 16-bit masters and moments, not remainders.
  CHECK_FALSE(engine_violation(pf.plan, Engine::ztune).has_value());
  pf.plan.master_dtype = Precision::fp32;
  pf.plan.param_remainders = true;
  CHECK(engine_violation(pf.plan, Engine::ztune) == EngineRule::zt_optimizer_dtype);
  CHECK_THAT(std::string(engine_rule_text(EngineRule::zt_optimizer_dtype)),
             Contains("expected param_remainders false"));
  pf.plan.param_remainders = false;
  pf.plan.master_dtype = Precision::fp16;
  REQUIRE_THROWS_WITH(deepspeed_config(pf, "plan.json"), Contains("DeepSpeed keeps its optimizer states in fp32"));
  pf.plan.zero_stage = 2;
  CHECK(engine_violation(pf.plan, Engine::fsdp) == EngineRule::fs_optimizer_dtype);
  CHECK_THAT(std::string(engine_rule_text(EngineRule::fs_optimizer_dtype)), Contains("expected master_dtype"));
}

// Megatron's block method: Megatron-Core's --recompute-method block
// --recompute-num-layers N (megatron/training/arguments.py; the count
// TransformerBlock._checkpointed_forward takes per model chunk). DeepSpeed's
// activation checkpointing and torchtitan recompute every layer or every k-th.
TEST_CASE("block recomputation exports as Megatron's --recompute-method block, the other engines refuse it",
          "[tuner][export][recompute][block]") {
  PlanFile pf = dp8_plan(1);
  Plan& p = pf.plan;
  p.recompute = Recompute::full;
  const auto uniform = megatron_arguments(pf, "plan.json");
  const std::vector<std::string> every{"--recompute-granularity", "full", "--recompute-method", "uniform",
                                       "--recompute-num-layers", "1"};
  CHECK(std::search(uniform.begin(), uniform.end(), every.begin(), every.end()) != uniform.end());
  p.recompute_num_layers = 5;
  const auto block = megatron_arguments(pf, "plan.json");
  const std::vector<std::string> five{"--recompute-granularity", "full", "--recompute-method", "block",
                                      "--recompute-num-layers", "5"};
  CHECK(std::search(block.begin(), block.end(), five.begin(), five.end()) != block.end());
  CHECK(std::count(block.begin(), block.end(), "--recompute-method") == 1);
  CHECK_FALSE(engine_violation(p, Engine::megatron).has_value());
  CHECK_FALSE(engine_violation(p, Engine::ztune).has_value());
  CHECK(*engine_violation(p, Engine::deepspeed) == EngineRule::ds_block_recompute);
  CHECK_THROWS_WITH(deepspeed_config(pf, "plan.json"),
                    Contains("plan.json: deepspeed cannot run this plan") && Contains("--checkpoint-activations"));
  p.zero_stage = 3;
  CHECK(*engine_violation(p, Engine::fsdp) == EngineRule::fs_block_recompute);
  CHECK_THAT(std::string(engine_rule_text(EngineRule::fs_block_recompute)), Contains("--engine megatron"));
}

TEST_CASE("Megatron-DeepSpeed's launch spells the model as its own parser does, and states dropout and the "
          "environment it asserts", "[tuner][export]") {
  // Oracle: Megatron-DeepSpeed megatron/arguments.py (allow_abbrev=False, parse_args):
  // --num-key-value-heads, --use-rotary-position-embeddings, --rotary-position-embeddings-theta,
  // --normalization {layernorm,rmsnorm}, --layernorm-epsilon, --no-position-embedding; Megatron-LM's
  // --group-query-attention, --position-embedding-type rope, --rotary-base, --norm-epsilon are argparse
  // errors there. validate_args raises without CUDA_DEVICE_MAX_CONNECTIONS=1 under --sequence-parallel.
  PlanFile pf;
  pf.model = load_transformer("llama-405b");  // GQA 8, RMSNorm, RoPE
  pf.model->rope_theta = 500000;              // Llama 3.1's base
  pf.cluster = load_cluster("dgx-h100x4");
  Plan& p = pf.plan;
  p.tp = 8;
  p.dp = 4;
  p.zero_stage = 1;
  p.sequence_parallel = true;
  p.micro_batch = 1;
  p.grad_accum = 256;
  p.global_batch = 1024;
  p.precision = Precision::bf16;
  p.attention = AttentionKernel::flash;
  const std::string ds = deepspeed_launch(pf, "ds_config.json", "plan.json");
  CHECK_THAT(ds, StartsWith("CUDA_DEVICE_MAX_CONNECTIONS=1 deepspeed "));
  for (const char* want : {" --num-key-value-heads 8", " --use-rotary-position-embeddings", " --no-position-embedding",
                           " --normalization rmsnorm", " --rotary-position-embeddings-theta 500000",
                           " --attention-dropout 0 --hidden-dropout 0"})
    CHECK_THAT(ds, Contains(want));
  for (const char* megatron_lm_only : {"--group-query-attention", "--num-query-groups", "--position-embedding-type",
                                       "--rotary-base", "--norm-epsilon", "RMSNorm"})
    CHECK_THAT(ds, !Contains(megatron_lm_only));
  // The same plan for Megatron-LM keeps Megatron-LM's names.
  const std::string mg = megatron_launch(pf, "plan.json");
  CHECK_THAT(mg, Contains("--group-query-attention --num-query-groups 8") && Contains("--normalization RMSNorm") &&
                     Contains("--position-embedding-type rope") && Contains("--attention-dropout 0 --hidden-dropout 0"));
  // Qwen2's Q/K/V-only biases have no Megatron-DeepSpeed flag: refused, not dropped.
  pf.model->qkv_bias = true;
  pf.model->bias = false;
  CHECK_THROWS_WITH(deepspeed_launch(pf, "ds.json", "plan.json"), Contains("Megatron-DeepSpeed has no biases on the Q, K"));
}

namespace {

/// The words a POSIX shell makes of `line` (sh's own parse: the oracle), one per line.
std::string shell_words(const std::string& line) {
  const std::string script = (std::filesystem::temp_directory_path() / "ztune_export_words.sh").string();
  std::ofstream(script) << "set -- " << line << "\nprintf '%s\\n' \"$@\"\n";
  std::string out;
  if (FILE* f = ::popen(("/bin/sh " + script).c_str(), "r")) {
    char buf[4096];
    while (std::fgets(buf, sizeof buf, f) != nullptr) out += buf;
    ::pclose(f);
  }
  std::filesystem::remove(script);
  return out;
}

}  // namespace

TEST_CASE("a launch names its files as one shell word each, under srun too", "[tuner][export]") {
  // A name with a space or a quote had split into two arguments or broken the srun line.
  CHECK(shell_word("ds_config.json") == "ds_config.json");
  PlanFile pf;
  pf.model = load_transformer("llama-7b");
  pf.cluster = load_cluster("dgx-h100x4");
  pf.plan.dp = 32;
  pf.plan.zero_stage = 1;
  pf.plan.micro_batch = 1;
  pf.plan.grad_accum = 16;
  pf.plan.global_batch = 512;
  pf.plan.precision = Precision::bf16;
  for (const std::string name : {"my ds.json", "it's.json"}) {
    CHECK_THAT(shell_words(deepspeed_launch(pf, name, "plan.json")), Contains("\n--deepspeed_config\n" + name + "\n"));
    // Under srun the node's command is one bash -c word, which holds the name as one word in turn.
    const std::string srun = srun_launch(pf, deepspeed_torchrun_launch(pf, name, "plan.json"), "plan.json");
    const std::string words = shell_words(srun);
    const auto c = words.find("\n-c\n");
    REQUIRE(c != std::string::npos);
    std::string inner = words.substr(c + 4);
    inner.pop_back();  // the node's command, as bash -c receives it
    const std::string after = inner.substr(inner.find("; ") + 2);
    CHECK_THAT(shell_words(after), Contains("\n--deepspeed_config\n" + name + "\n"));
  }
}

TEST_CASE("torchtitan's DDP is data parallelism alone: ZeRO 0 with dp > 1 beside tp, pp or cp is refused",
          "[tuner][export]") {
  // Oracle: torchtitan parallelize.py applies DDP (data_parallel_replicate_degree
  // without sharding) only when it is the whole mesh ("DDP has not supported >
  // 1D parallelism"); the fsdp search had picked dp2×tp2×pp2 z0 as its best.
  Plan p;
  p.dp = 2;
  p.tp = 2;
  p.zero_stage = 0;
  CHECK(engine_violation(p, Engine::fsdp) == EngineRule::fs_ddp_one_dimensional);
  CHECK_THAT(std::string(engine_rule_text(EngineRule::fs_ddp_one_dimensional)),
             Contains("DDP has not supported > 1D parallelism"));
  p.tp = 1;
  CHECK_FALSE(engine_violation(p, Engine::fsdp));  // DDP alone runs
  p.dp = 1;
  p.tp = 2;
  CHECK_FALSE(engine_violation(p, Engine::fsdp));  // no data parallelism: no DDP
  p.dp = 2;
  p.zero_stage = 3;
  CHECK_FALSE(engine_violation(p, Engine::fsdp));  // FSDP beside TP
}

// FP8 linear layers. Oracles: Megatron-LM's megatron/training/arguments.py
// (--fp8-format {e4m3, hybrid}, --fp8-recipe {tensorwise, delayed, mxfp8,
// blockwise}, --fp8-amax-history-len, --fp8-amax-compute-algo {most_recent,
// max}) and torchtitan's JobConfig (model.converters, float8.recipe_name
// {tensorwise, rowwise, rowwise_with_gw_hp}, filter_fqns,
// enable_fsdp_float8_all_gather); Megatron-DeepSpeed's arguments.py has no
// FP8 flag.
TEST_CASE("FP8 exports as Transformer Engine's flags and torchtitan's float8 converter, DeepSpeed and ztune refuse it",
          "[tuner][export][fp8]") {
  using Catch::Matchers::Contains;
  PlanFile pf = dense_plan_on("dgx-h100", AttentionKernel::cudnn);
  Plan& p = pf.plan;
  p.dp = 8;
  p.fp8 = Fp8Recipe::delayed;
  const auto mg = megatron_arguments(pf, "plan.json");
  const std::string joined = [&] {
    std::string j;
    for (const auto& a : mg) j += a + " ";
    return j;
  }();
  CHECK_THAT(joined, Contains("--fp8-format hybrid --fp8-recipe delayed --fp8-amax-history-len 1024 "
                              "--fp8-amax-compute-algo max "));
  p.fp8 = Fp8Recipe::tensorwise;
  const auto cs = megatron_arguments(pf, "plan.json");
  CHECK(std::count(cs.begin(), cs.end(), "--fp8-amax-history-len") == 0);  // a delayed-scaling knob
  CHECK(std::find(cs.begin(), cs.end(), "tensorwise") != cs.end());
  p.attention = AttentionKernel::flash;  // (deepspeed refuses cudnn first)
  CHECK(engine_violation(p, Engine::deepspeed) == EngineRule::ds_fp8);
  CHECK(engine_violation(p, Engine::ztune) == EngineRule::zt_fp8);
  CHECK_THROWS_WITH(deepspeed_launch(pf, "ds_config.json", "plan.json"),
                    Contains("deepspeed cannot run this plan") && Contains("fp8"));
  // torchtitan: tensorwise only, as its float8 converter; the output layer filtered.
  p.zero_stage = 3;
  CHECK_FALSE(engine_violation(p, Engine::fsdp).has_value());
  pf.model = llama3_8b();
  const std::string toml = torchtitan_config(pf, "plan.json");
  CHECK_THAT(toml, Contains("converters = [\"float8\"]\n"));
  CHECK_THAT(toml, Contains("[float8]\nrecipe_name = \"tensorwise\"\nenable_fsdp_float8_all_gather = false\n"
                            "filter_fqns = [\"output\"]\n"));
  p.fp8 = Fp8Recipe::delayed;
  CHECK(engine_violation(p, Engine::fsdp) == EngineRule::fs_fp8_delayed);
  CHECK_THROWS_WITH(torchtitan_config(pf, "plan.json"), Contains("use fp8 \"tensorwise\""));
  p.fp8 = Fp8Recipe::none;
  CHECK_THAT(torchtitan_config(pf, "plan.json"), !Contains("[float8]") && !Contains("converters"));
  // FP8 under Megatron-FSDP is not modelled.
  p.fp8 = Fp8Recipe::delayed;
  p.zero_stage = 3;
  CHECK(engine_violation(p, Engine::megatron) == EngineRule::mg_fp8_fsdp);
  p.zero_stage = 1;
  CHECK_FALSE(engine_violation(p, Engine::megatron).has_value());
  // FP8 parameters: Megatron-LM's --fp8-param-gather, beside the distributed optimizer only.
  p.fp8_param_gather = true;
  const auto pg = megatron_arguments(pf, "plan.json");
  CHECK(std::count(pg.begin(), pg.end(), "--fp8-param-gather") == 1);
  p.zero_stage = 0;
  CHECK(engine_violation(p, Engine::megatron) == EngineRule::mg_fp8_param_gather);
  p.zero_stage = 3;
  p.fp8 = Fp8Recipe::tensorwise;
  CHECK(engine_violation(p, Engine::fsdp) == EngineRule::fs_fp8_param_gather);
  p.fp8_param_gather = false;
  p.zero_stage = 1;
  // A profile that names no FP8 library cannot price the plan, whatever the engine.
  EngineProfile bare;
  bare.name = "custom";
  REQUIRE(engine_profile_violation(p, bare));
  CHECK_THAT(*engine_profile_violation(p, bare), StartsWith("$.fp8: the custom engine profile names no FP8 library"));
  bare.fp8 = Fp8Library::transformer_engine;
  CHECK_FALSE(engine_profile_violation(p, bare));
  p.fp8 = Fp8Recipe::none;
  bare.fp8 = Fp8Library::none;
  CHECK_FALSE(engine_profile_violation(p, bare));
}
