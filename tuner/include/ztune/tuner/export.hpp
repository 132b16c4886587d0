#pragma once
// `ztune export`: a plan file turned into what DeepSpeed and Megatron-LM take.
// DeepSpeed: a ds_config.json (batch sizes, zero_optimization with offload and
// bucket sizes, fp16/bf16, activation_checkpointing, pipeline, 1-bit Adam) and
// a Megatron-DeepSpeed launch command. Megatron-LM: its command-line arguments.
// A plan the engine cannot run is refused (InputError) with the engine's rule.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ztune/vocab/plan.hpp"
#include "ztune/tuner/engine.hpp"

namespace ztune {

/// How the launchers start the plan's ranks: `nodes` × `per_node` = the plan's
/// devices, the same count on every node (torchrun, the deepspeed launcher),
/// tensor-parallel groups inside a node. Throws InputError naming `file` when
/// the cluster's nodes cannot hold them so (250 GPUs on nodes of 16 at tp 2:
/// 10 per node needs 25 nodes).
struct LaunchShape {
  int nodes = 1;
  int per_node = 1;
};
LaunchShape launch_shape(const PlanFile& pf, const std::string& file);
/// The launch of `gpus` ranks at tensor parallelism `tp` on at most `nodes`
/// nodes of `node_gpus` (the rule above), or nullopt when none exists. The
/// search keeps only such layouts for the engines these launchers start.
std::optional<LaunchShape> uniform_launch(int gpus, int tp, int node_gpus, int nodes);
/// What the printed launch leaves to the user, one line each: the deepspeed
/// hostfile or torchrun's MASTER_ADDR on several nodes, the NVMe path of
/// ZeRO-Infinity's offload.
std::vector<std::string> launch_placeholders(const PlanFile& pf, Engine e, const std::string& file);

/// Throws InputError "<file>: <engine> cannot run this plan: <rule>" when it cannot.
void require_engine_can_run(const Plan& p, Engine e, const std::string& file);

/// The ds_config.json for the plan (DeepSpeed config keys, bucket sizes in elements).
nlohmann::json deepspeed_config(const PlanFile& pf, const std::string& file);
/// "deepspeed --num_nodes N --num_gpus G pretrain_gpt.py ... --deepspeed_config <config_path>".
/// Model shape arguments come from the plan file's embedded model, when present.
std::string deepspeed_launch(const PlanFile& pf, const std::string& config_path, const std::string& file);

/// Megatron-LM pretrain_gpt.py arguments for the plan (and the embedded model's shape).
std::vector<std::string> megatron_arguments(const PlanFile& pf, const std::string& file);
/// "torchrun --nnodes N --nproc_per_node G" for the plan's launch_shape, with the
/// c10d rendezvous on $MASTER_ADDR when it spans nodes (Megatron's and torchtitan's launches).
std::string torchrun_command(const PlanFile& pf, const std::string& file);
/// "torchrun --nnodes N --nproc_per_node G pretrain_gpt.py <arguments>".
std::string megatron_launch(const PlanFile& pf, const std::string& file);

/// torchtitan's job TOML for the plan (the fsdp engine; export_torchtitan.cpp):
/// [parallelism] degrees (replicate × shard × tp × cp × pp = the plan's
/// devices), batch sizes, activation checkpointing, precision. Refuses (InputError
/// naming `file`) what the fsdp engine cannot run, a model that is not Llama
/// 3's architecture, fp16, tensor parallelism without sequence parallelism, and
/// ztune's selective recomputation.
std::string torchtitan_config(const PlanFile& pf, const std::string& file);
/// "torchrun --nnodes N --nproc_per_node G [rendezvous] -m torchtitan.train --job.config_file <config_path>".
std::string torchtitan_launch(const PlanFile& pf, const std::string& config_path, const std::string& file);
/// What the config and launch leave to the user: launch_placeholders' for torchrun,
/// the tokenizer, the dataset, and a flavor to register when the model is not one.
std::vector<std::string> torchtitan_placeholders(const PlanFile& pf, const std::string& file);

}  // namespace ztune
