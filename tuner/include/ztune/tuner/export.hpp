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

/// How the launchers start the plan's ranks, placed as the cost model placed
/// them (place_groups: ranks fill whole nodes in order): `nodes` nodes, each
/// running `per_node` ranks but the last, which runs `last_node` (fewer when
/// the plan's devices do not fill it: 250 GPUs of 16-GPU nodes are 15 × 16 +
/// 10). Tensor-parallel groups stay inside a node: every node's count is a
/// multiple of tp, or tp spans whole nodes. torchrun (its elastic agent numbers
/// ranks by the cumulative local world sizes, torch/distributed/elastic/agent/
/// server/api.py _assign_worker_ranks) and the deepspeed launcher (a hostfile's
/// slots per host, deepspeed/launcher/launch.py global_rank_mapping) both start
/// such a ragged launch. When whole nodes cannot hold the tp groups (tp 3 on
/// nodes of 16) the same count on every node is looked for instead.
struct LaunchShape {
  int nodes = 1;
  int per_node = 1;
  int last_node = 1;
  [[nodiscard]] bool uniform() const { return last_node == per_node; }
  [[nodiscard]] long long ranks() const { return static_cast<long long>(nodes - 1) * per_node + last_node; }
};
/// The plan's launch; throws InputError naming `file` when none exists.
LaunchShape launch_shape(const PlanFile& pf, const std::string& file);
/// The launch of `gpus` ranks at tensor parallelism `tp` on at most `nodes`
/// nodes of `node_gpus` (the rule above), or nullopt when none exists. The
/// search keeps only such layouts for the engines these launchers start.
std::optional<LaunchShape> plan_launch(int gpus, int tp, int node_gpus, int nodes);
/// What the printed launch leaves to the user, one line each: the deepspeed
/// hostfile or torchrun's MASTER_ADDR on several nodes, the NVMe path of
/// ZeRO-Infinity's offload.
std::vector<std::string> launch_placeholders(const PlanFile& pf, Engine e, const std::string& file);

/// Throws InputError "<file>: <engine> cannot run this plan: <rule>" when it cannot.
void require_engine_can_run(const Plan& p, Engine e, const std::string& file);

/// The ds_config.json for the plan (DeepSpeed config keys, bucket sizes in elements).
nlohmann::json deepspeed_config(const PlanFile& pf, const std::string& file);
/// "deepspeed --num_nodes N --num_gpus G pretrain_gpt.py ... --deepspeed_config <config_path>"
/// (without --num_gpus when the launch is ragged: the hostfile's slots say each node's count).
/// Model shape arguments come from the plan file's embedded model, when present.
std::string deepspeed_launch(const PlanFile& pf, const std::string& config_path, const std::string& file);
/// Why the Megatron-DeepSpeed launch would not run the config's plan although
/// DeepSpeed can (1-bit Adam: its pretrain_gpt.py hands DeepSpeed an optimizer
/// of its own), with what to run instead; nullopt when it runs it.
[[nodiscard]] std::optional<std::string> deepspeed_launch_refusal(const Plan& p);
/// What the config needs of DeepSpeed's version ("sparse_attention needs
/// DeepSpeed 0.18 or earlier ..."), one line each.
[[nodiscard]] std::vector<std::string> deepspeed_version_notes(const Plan& p);

/// Megatron-LM pretrain_gpt.py arguments for the plan (and the embedded model's shape).
std::vector<std::string> megatron_arguments(const PlanFile& pf, const std::string& file);
/// "torchrun --nnodes N --nproc_per_node G" for the plan's launch_shape, with the
/// c10d rendezvous on $MASTER_ADDR when it spans nodes (Megatron's and torchtitan's
/// launches). A ragged launch is one command for every node: the static
/// rendezvous with --node_rank $NODE_RANK, and the last node's smaller count.
std::string torchrun_command(const PlanFile& pf, const std::string& file);
/// `s` as one word of a POSIX shell command (a file name in a launch line):
/// itself, or single-quoted where a shell would split or expand it.
std::string shell_word(const std::string& s);
/// "torchrun --nnodes N --nproc_per_node G pretrain_gpt.py <arguments>".
std::string megatron_launch(const PlanFile& pf, const std::string& file);
/// Megatron-DeepSpeed's pretrain_gpt.py started by torchrun rather than the
/// deepspeed launcher (what srun_launch wraps for a DeepSpeed plan).
std::string deepspeed_torchrun_launch(const PlanFile& pf, const std::string& config_path, const std::string& file);
/// A torchrun launch (megatron_launch, torchtitan_launch, deepspeed_torchrun_launch)
/// under Slurm: "srun --nodes N --ntasks-per-node 1 bash -c '…'", one torchrun
/// per node with NODE_RANK = $SLURM_NODEID and MASTER_ADDR the allocation's first host.
std::string srun_launch(const PlanFile& pf, const std::string& torchrun_launch, const std::string& file);

/// torchtitan's job TOML for the plan (the fsdp engine; export_torchtitan.cpp):
/// [parallelism] degrees (replicate × shard × tp × cp × pp = the plan's
/// devices), batch sizes, activation checkpointing, precision. Refuses (InputError
/// naming `file`) what the fsdp engine cannot run, a model that is not Llama
/// 3's architecture, fp16, tensor parallelism without sequence parallelism, and
/// ztune's selective recomputation.
std::string torchtitan_config(const PlanFile& pf, const std::string& file);
/// Why torchtitan's trainer cannot train this model (it runs its Llama 3 model
/// only): "$.model.field: ...", or "" when it can. The search says so for an
/// fsdp plan it cannot export.
[[nodiscard]] std::string torchtitan_model_refusal(const Transformer& m);
/// The plan as torchtitan runs it: its gradients reduced (and, under a
/// pipeline, accumulated) in fp32, training.mixed_precision_reduce's only
/// value. What ztune export's memory check predicts for --format torchtitan.
Plan as_torchtitan_runs(const Plan& p);
/// "torchrun --nnodes N --nproc_per_node G [rendezvous] -m torchtitan.train --job.config_file <config_path>".
std::string torchtitan_launch(const PlanFile& pf, const std::string& config_path, const std::string& file);
/// What the config and launch leave to the user: launch_placeholders' for torchrun,
/// the tokenizer, the dataset, and a flavor to register when the model is not one.
std::vector<std::string> torchtitan_placeholders(const PlanFile& pf, const std::string& file);

}  // namespace ztune
