#include "plan_flags.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "command.hpp"
#include "ztune/vocab/input_error.hpp"

namespace ztune::cli {

void add_engine_flags(CLI::App& app, std::string& engine, bool& compile, const std::string& engine_help) {
  app.add_option("--engine", engine, engine_help)->check(CLI::IsMember(std::vector<std::string>(std::begin(kPlanEngineNames), std::end(kPlanEngineNames))));
  app.add_flag("--compile", compile,
               "The engine runs under a graph compiler (torch.compile, XLA): its elementwise chains are priced "
               "fused, with the engine profile's compiled_elementwise_traffic, and its loss as one fused kernel "
               "(time and memory)");
}

HardwareProfile priced_profile(const Cluster& c, const std::string& profile_file, const std::string& engine,
                               bool compile) {
  return with_engine(profile_file.empty() ? default_profile_for(c) : load_profile(profile_file), engine, compile);
}

void add_accounting(CLI::App& app, std::string& accounting) {
  app.add_option("--accounting", accounting,
                 "Model-state accounting of a 16-bit plan: engine (as --engine keeps them: megatron for megatron, "
                 "deepspeed for deepspeed, paper for fsdp), paper (ZeRO paper, 16-bit grads), deepspeed "
                 "(estimate_zero2/3_model_states_mem_needs, fp32 grad partitions), megatron (Megatron-Core's "
                 "gradient buffer: fp32 for bf16). ztune's executor keeps its own allocations whatever this says: "
                 "2 + 2 + 12 bytes a parameter in 16-bit training (16-bit parameters and gradients, fp32 masters "
                 "and Adam moments); fp32 plans 4 + 4 + 8")
      ->check(choices_after("engine", names_of(kStateAccountingNames)))
      ->capture_default_str();
}

CLI::IsMember choices_after(const char* first, std::vector<std::string> names) {
  names.insert(names.begin(), first);
  return CLI::IsMember(std::move(names));
}

void add_memory_headroom(CLI::App& app, double& pct) {
  app.add_option("--memory-headroom", pct,
                 "Percent of each GPU's memory to keep free: a plan fits only below capacity × (1 − PCT/100) "
                 "(default 0: the predicted CUDA runtime and fragmentation lines are the only reserve)")
      ->check(CLI::Validator([](const std::string& v) { return number_complaint(v, kMemoryHeadroomFlag); },
                             "PCT in [0, 50]"));
}

void InputFlags::add_to(CLI::App& app, bool required) {
  auto* c = app.add_option("--cluster", cluster, "Cluster: catalog name (ztune list clusters) or JSON file");
  auto* m = app.add_option("--model", model, "Model: catalog name, ztune model JSON or Hugging Face config.json");
  if (required) { c->required(); m->required(); }
  // The cluster file's own bound (ztune.cluster/1 "nodes"), so that nodes × GPUs fits an int.
  app.add_option("--nodes", nodes, "Override the cluster's node count")
      ->check(integer_in(1, kMaxClusterNodes, "a node count"));
  app.add_option("--seq", seq, "Override the model's sequence length")->check(integer_in(kSeqFlag));
}

Cluster InputFlags::load_cluster_or_throw() const {
  if (cluster.empty()) throw InputError("--cluster: required (a catalog name or a file)");
  Cluster c = load_cluster(cluster);
  if (nodes > 0) c.nodes = nodes;
  return c;
}

Transformer InputFlags::load_model_or_throw() const {
  if (model.empty()) throw InputError("--model: required (a catalog name or a file)");
  return load_transformer(model, seq);
}

void PlanFlags::add_to(CLI::App& app) {
  // Degrees, sizes and layer counts are ints: a whole number in int's range
  // ("--tp 1e18" said as such, not CLI11's "Could not convert").
  const CLI::Validator kWholeCount = integer_in(1, std::numeric_limits<int>::max(), "a whole number");
  app.add_option("--plan", plan_file, "Plan JSON file (instead of the plan flags)")->check(GivenPath);
  const std::size_t first = app.get_options().size();
  app.add_option("--tp", tp, "Tensor-parallel degree")->check(kWholeCount);
  app.add_option("--pp", pp, "Pipeline-parallel degree")->check(kWholeCount);
  app.add_option("--cp", cp,
                 "Context-parallel degree: the sequence split over cp ranks, ring attention (Megatron-Core "
                 "--context-parallel-size)")
      ->check(kWholeCount);
  app.add_option("--ulysses", ulysses,
                 "DeepSpeed-Ulysses degree: the sequence split over ulysses ranks, all-to-all over heads around "
                 "attention (Megatron-DeepSpeed --ds-sequence-parallel-size)")
      ->check(kWholeCount);
  app.add_option("--dp", dp, "Data-parallel degree (default: all remaining devices)")->check(kWholeCount);
  app.add_option("--dp-shard", dp_shard,
                 "Hybrid sharding: ZeRO-3 shards inside groups of N data-parallel ranks, replicated across them "
                 "(FSDP HYBRID_SHARD, torchtitan data_parallel_shard_degree, DeepSpeed mics_shard_size); needs "
                 "--zero 3; N = all dp × cp ranks is plain ZeRO-3")
      ->check(integer_in(kDpShardFlag));
  app.add_option("--zero", zero, "ZeRO stage")->check(integer_in(0, 3, "a ZeRO stage"));
  // As a plan file holds them (plan.hpp's limits): what predict prices can be saved and run.
  app.add_option("--micro-batch", micro_batch, "Sequences per micro-batch")
      ->check(integer_in(1, kMaxMicroBatch, "a micro-batch size"));
  app.add_option("--global-batch", global_batch, "Sequences per step (default: the model file's)")
      ->check(integer_in(kGlobalBatchFlag));
  app.add_option("--recompute", recompute, "Activation recomputation")
      ->check(CLI::IsMember(names_of(kRecomputeNames)));
  app.add_option("--recompute-policy", recompute_policy,
                 "What --recompute selective recomputes: attention (the attention core, Korthikanti et al. 2022; "
                 "Megatron-LM, NeMo, DeepSpeed), alternate_mm (torchtitan's op-level SAC, selective_ac_option "
                 "\"op\": every other matmul of a block, wk, wo and w3, with the elementwise ops), mlp_in "
                 "(MaxText remat_policy save_dot_except_mlpwi: the MLP input projections, the attention core and "
                 "the elementwise ops), alternate_layers (torchtitan's layer checkpointing, selective_ac_option \"K\": "
                 "every K-th layer recomputed whole, --recompute-every K, 2 by default) or dots (JAX dots_saveable, PaxML SAVE_DOT_ONLY: every matmul's output "
                 "saved, the attention core and the elementwise ops recomputed)")
      ->check(CLI::IsMember(names_of(kSelectivePolicyNames)));
  app.add_option("--recompute-every", recompute_every,
                 "With --recompute-policy alternate_layers: every K-th layer recomputed whole (torchtitan "
                 "selective_ac_option \"K\", fms-fsdp selective_checkpointing 1/K; default 2)")
      ->check(integer_in(2, 1 << 20, "a layer interval"));
  app.add_option("--recompute-num-layers", recompute_num_layers,
                 "Megatron's block recomputation (--recompute-method block --recompute-num-layers N; NeMo "
                 "activations_checkpoint_method block): with --recompute full, only the first N layers of each "
                 "model chunk are recomputed, the others keep every activation (default: every layer)")
      ->check(integer_in(1, kMaxPlanDegree, "a layer count"));
  app.add_flag("--sequence-parallel", sequence_parallel, "Megatron sequence parallelism (needs tp >= 2)");
  app.add_flag("--tp-comm-overlap", tp_comm_overlap,
               "Overlap the sequence-parallel all-gathers and reduce-scatters with their GEMMs (Megatron-Core "
               "--tp-comm-overlap, NeMo ub_tp_comm_overlap; needs --sequence-parallel)");
  app.add_flag("--partition-activations", partition_activations,
               "ZeRO-R partitioned activation checkpoints (Pa): with full recomputation, each layer's saved input "
               "split over the tp ranks and all-gathered before it is recomputed (DeepSpeed partition_activations, "
               "Megatron-LM --distribute-saved-activations; needs tp >= 2, not with --sequence-parallel)");
  app.add_flag("--cpu-checkpointing", cpu_checkpointing,
               "ZeRO-R CPU checkpointing: with full recomputation, each layer's saved input copied to host memory "
               "after its forward and back before it is recomputed (DeepSpeed activation_checkpointing."
               "cpu_checkpointing, Megatron-DeepSpeed --checkpoint-in-cpu; needs --recompute full)");
  app.add_flag("--grad-allreduce", grad_allreduce,
               "ZeRO-1/2 all-reduce each gradient bucket instead of reduce-scattering it to its partition owners "
               "(DeepSpeed zero_optimization.reduce_scatter false; its ZeRO stage 1 before March 2020)");
  add_grad_reduce_dtype(app, grad_reduce_dtype);
  add_optimizer_dtypes(app, master_dtype, moments_dtype, param_remainders);
  add_fp8(app, fp8, &fp8_param_gather);
  app.add_option("--virtual-stages", virtual_stages, "Model chunks per stage (interleaved 1F1B)")
      ->check(integer_in(1, kMaxVirtualStages, "a chunk count"));
  app.add_option("--schedule", schedule, "Pipeline schedule (default 1f1b, interleaved with --virtual-stages)")
      ->check(CLI::IsMember(names_of(kScheduleNames)));
  app.add_option("--offload-optimizer", offload_optimizer, "Optimizer states offload")
      ->check(CLI::IsMember(names_of(kOffloadTargetNames)));
  app.add_option("--offload-params", offload_params, "Parameter offload (ZeRO-3)")
      ->check(CLI::IsMember(names_of(kOffloadTargetNames)));
  app.add_option("--precision", precision, "fp16, bf16 or fp32 (default bf16 where supported, else fp16)")
      ->check(CLI::IsMember(names_of(kPrecisionNames)));
  app.add_flag("--onebit-adam", onebit_adam, "1-bit Adam compressed communication");
  app.add_option("--freeze-step", freeze_step, "1-bit Adam warm-up steps")->check(integer_in(0, kMaxFreezeStep, "a step count"));
  app.add_option("--sparse-attention", sparse_attention, "Block-sparse attention layout")
      ->check(CLI::IsMember(names_of(kSparseLayoutNames)));
  app.add_option("--sparse-block", sparse_block, "Sparse attention block size")
      ->check(integer_in(16, 128, "a block size"));
  app.add_flag("--zeropp", zeropp, "ZeRO++ (quantized gathers, hpZ, quantized gradients)");
  app.add_option("--attention", attention,
                 "Attention kernel: standard (s×s probabilities stored, Megatron's fused scale-mask-softmax), flash "
                 "(FlashAttention-2: log-sum-exp only), cudnn (cuDNN's fused flash attention, Transformer Engine "
                 "NVTE_FUSED_ATTN=1: the same memory, faster on H100) or eager (standard's memory with the mask, "
                 "softmax and dropout as separate kernels: Megatron-LM 2019, --no-masked-softmax-fusion)")
      ->check(CLI::IsMember(names_of(kAttentionKernelNames)));
  app.add_flag("--no-bias-fusion", no_bias_fusion,
               "The bias add, activation, dropout and residual add as kernels of their own instead of Megatron's "
               "fused bias-GeLU/SwiGLU and bias-dropout-add (Megatron-LM --no-bias-gelu-fusion or "
               "--no-bias-swiglu-fusion, and --no-bias-dropout-fusion; the 2019 Megatron-LM and its "
               "DeepSpeedExamples forks)");
  app.add_option("--stage-layers", stage_layers,
                 "Layers per pipeline stage, first to last (pp counts summing to the layers; default balanced "
                 "as DeepSpeed's uniform partition)")
      ->delimiter(',')
      ->check(kWholeCount);
  app.add_option("--chunk-layers", chunk_layers,
                 "Layers of each model chunk with --virtual-stages, in the order the pipeline runs them (chunk c of "
                 "stage r is entry c*pp + r; pp*v counts, a stage's differing by at most one, only the first and "
                 "last may be 0: Megatron-Core's accounting layout; default each stage in equal chunks)")
      ->delimiter(',')
      ->check(integer_in(0, std::numeric_limits<int>::max(), "a layer count"));
  app.add_option("--first-stage-layers", first_stage_layers,
                 "Layers on the first pipeline stage, the rest balanced (Megatron-LM "
                 "--decoder-first-pipeline-num-layers)")
      ->check(kWholeCount);
  app.add_option("--last-stage-layers", last_stage_layers,
                 "Layers on the last pipeline stage, the rest balanced (Megatron-LM "
                 "--decoder-last-pipeline-num-layers)")
      ->check(kWholeCount);
  app.add_flag("--account-for-embedding-in-pipeline-split", embedding_in_split,
               "Count the embedding as a layer of the first stage when splitting (Megatron-LM)");
  app.add_flag("--account-for-loss-in-pipeline-split", loss_in_split,
               "Count the loss as a layer of the last stage when splitting (Megatron-LM)");
  app.add_flag("--no-overlap", no_overlap, "Do not overlap gradient reduction with backward");
  const auto all = app.get_options();
  options_.assign(all.begin() + static_cast<long>(first), all.end());
}

std::string PlanFlags::given_flag() const {
  for (const CLI::Option* o : options_)
    if (o->count() > 0) return o->get_name();
  return "";
}

bool PlanFlags::given(std::string_view name) const {
  for (const CLI::Option* o : options_)
    if (o->count() > 0 && o->check_name(std::string(name))) return true;
  return false;
}

void PlanFlags::refuse_beside(const std::string& plan_path) const {
  if (const std::string flag = given_flag(); !flag.empty())
    throw InputError(flag + ": the plan file " + plan_path + " gives the whole plan; drop " + flag +
                     " or the file (a flag beside it would be ignored)");
}

InputError flag_error(const std::string& msg) {
  const auto colon = msg.find(": ");
  std::string field = msg.substr(2, colon - 2);
  // A list's entry keeps its index: "--chunk-layers[2]: 0 layers; ...".
  std::string entry;
  if (auto bracket = field.find('['); bracket != std::string::npos) {
    entry = field.substr(bracket);
    field.resize(bracket);
  }
  for (auto& ch : field)
    if (ch == '_' || ch == '.') ch = '-';
  if (field == "zero-stage") field = "zero";
  if (field.starts_with("communication-")) field.erase(0, std::string_view("communication-").size());
  if (field == "offload") field = "offload-optimizer/--offload-params";
  if (field == "reduce-scatter") field = "grad-allreduce";  // the flag sets reduce_scatter false
  if (field == "bias-fusion") field = "no-bias-fusion";      // and this one bias_fusion false
  if (field.starts_with("optimizer-")) field.erase(0, std::string_view("optimizer-").size());
  if (field == "optimizer") field = "master-dtype/--moments-dtype";
  if (field == "sparse-attention-block") field = "sparse-block";
  if (field == "sparse-attention-layout") field = "sparse-attention";
  // The accumulation follows from the batch flags (global = micro × accumulation × dp).
  if (field == "grad-accum") field = "global-batch/--micro-batch";
  return InputError("--" + field + entry + ": " + msg.substr(colon + 2));
}

void add_grad_reduce_dtype(CLI::App& app, std::string& dtype) {
  app.add_option("--grad-reduce-dtype", dtype,
                 "The dtype of the data-parallel gradient reduction: fp32 (Megatron-LM's default under --bf16, "
                 "torchtitan's mixed_precision_reduce, DeepSpeed communication_data_type fp32) or the plan's own "
                 "16-bit precision (Megatron-LM --grad-reduce-in-bf16, FSDP reduce_dtype bfloat16); default: the "
                 "engine's")
      ->check(CLI::IsMember(names_of(kPrecisionNames)));
}

void add_fp8(CLI::App& app, std::string& recipe, bool* param_gather) {
  app.add_option("--fp8", recipe,
                 "FP8 linear layers: the four linear GEMMs of each layer in FP8 (E4M3 forward, E5M2 gradients), "
                 "scaled delayed (Transformer Engine's amax history; Megatron-LM --fp8-format hybrid --fp8-recipe "
                 "delayed) or tensorwise (each tensor's own amax: --fp8-recipe tensorwise, torchtitan's float8); "
                 "needs a GPU with FP8 tensor cores (Hopper, Ada or newer); none (the default) keeps the plan's "
                 "precision")
      ->check(CLI::IsMember(names_of(kFp8RecipeNames)))
      ->capture_default_str();
  if (param_gather)
    app.add_flag("--fp8-param-gather", *param_gather,
                 "Keep the linear layers' weights in FP8 and gather them in FP8 (Megatron-LM --fp8-param-gather: no "
                 "16-bit copy and no separate FP8 cache; needs --fp8, the megatron engine and ZeRO-1)");
}

void add_optimizer_dtypes(CLI::App& app, std::string& master, std::string& moments, bool& remainders) {
  app.add_option("--master-dtype", master,
                 "The optimizer's copy of the parameters (mixed precision's master weights): fp32 (every engine's "
                 "default), fp16 (Megatron-Core --use-precision-aware-optimizer --main-params-dtype fp16) or bf16 "
                 "(NeMo's distributed_fused_adam optim.dtype bf16); a bf16 master beside bf16 parameters is the "
                 "parameters themselves, no copy (NeMo then sets Apex's store_params false; ztune's executor keeps "
                 "no copy of a master of its parameters' dtype), and an fp32 plan has none apart from its parameters")
      ->check(CLI::IsMember(names_of(kPrecisionNames)))
      ->capture_default_str();
  app.add_option("--moments-dtype", moments,
                 "Adam's first and second moments: fp32 (the default), bf16 or fp16 (Megatron-Core "
                 "--exp-avg-dtype and --exp-avg-sq-dtype with --use-precision-aware-optimizer; NeMo's "
                 "distributed_fused_adam optim.dtype)")
      ->check(CLI::IsMember(names_of(kPrecisionNames)))
      ->capture_default_str();
  app.add_flag("--param-remainders", remainders,
               "Keep the fp32 master weights as the 16 bits their bf16 parameters lack (2 bytes a parameter instead "
               "of 4; Transformer Engine FusedAdam and Apex store_param_remainders, Megatron-Core's default under "
               "--use-precision-aware-optimizer); needs bf16 and --master-dtype fp32");
}

std::string adam_states_text(const OptimizerDtypes& d) {
  return "master weights in " + to_string(d.master) + (d.remainders ? " (as remainders)" : "") +
         (d.in_params ? " (the parameters themselves: no copy)" : "") + ", moments in " + to_string(d.moments);
}

Plan PlanFlags::resolve(const Transformer& m, const Cluster& c) const {
  Plan p;
  if (!plan_file.empty()) {
    refuse_beside(plan_file);
    PlanFile pf = load_plan_file(plan_file);
    p = pf.plan;
    if (auto why = check_plan(p, m, c)) throw InputError(plan_file + ": " + in_plan_file(*why));
    return p;
  }
  // A flag that qualifies another says so when that one is missing, as
  // --recompute-policy without --recompute selective is refused: given at
  // their defaults (--recompute-every 2, --freeze-step 0) they had been
  // ignored without a word.
  if (given("--recompute-every") && recompute_policy != "alternate_layers")
    throw InputError("--recompute-every: says how often torchtitan's layer checkpointing recomputes a layer whole; "
                     "needs --recompute selective --recompute-policy alternate_layers");
  if (given("--freeze-step") && !onebit_adam)
    throw InputError("--freeze-step: 1-bit Adam's warm-up steps; needs --onebit-adam");
  p.tp = tp;
  p.pp = pp;
  p.cp = cp;
  p.ulysses = ulysses;
  const std::int64_t model_ways = static_cast<std::int64_t>(tp) * pp * cp * ulysses;
  if (model_ways > c.total_devices())
    throw InputError((ulysses > 1 ? "--tp/--pp/--ulysses: tp×pp×ulysses = "
                      : cp > 1    ? "--tp/--pp/--cp: tp×pp×cp = "
                                  : "--tp/--pp: tp×pp = ") +
                     std::to_string(model_ways) +
                     " exceeds the cluster's " + counted(static_cast<double>(c.total_devices()), "device"));
  p.dp = dp > 0 ? dp : static_cast<int>(c.total_devices() / model_ways);
  p.zero_stage = zero;
  // One shard group of all the weights' data-parallel ranks is plain ZeRO-3.
  p.dp_shard = dp_shard > 0 && dp_shard == p.dp_cp() ? 0 : dp_shard;
  p.micro_batch = micro_batch;
  p.virtual_stages = virtual_stages;
  p.sequence_parallel = sequence_parallel;
  p.tp_comm_overlap = tp_comm_overlap;
  p.partition_activations = partition_activations;
  p.bias_fusion = !no_bias_fusion;
  p.cpu_checkpointing = cpu_checkpointing;
  p.reduce_scatter = !grad_allreduce;
  if (!grad_reduce_dtype.empty()) p.grad_reduce_dtype = precision_of(grad_reduce_dtype);  // IsMember admitted only these
  p.master_dtype = *precision_of(master_dtype);  // likewise
  p.moments_dtype = *precision_of(moments_dtype);
  p.param_remainders = param_remainders;
  p.fp8 = *fp8_recipe_of(fp8);  // IsMember admitted only its names
  p.fp8_param_gather = fp8_param_gather;
  // CLI11's IsMember admitted only the tables' names.
  p.recompute = *recompute_of(recompute);
  p.recompute_policy = *selective_policy_of(recompute_policy);  // CLI::IsMember admitted only its names
  p.recompute_num_layers = recompute_num_layers;
  p.recompute_every = recompute_every;
  if (schedule.empty()) {
    p.schedule = virtual_stages > 1 ? Schedule::interleaved : Schedule::one_f_one_b;
  } else {
    p.schedule = *schedule_of(schedule);
  }
  p.offload_optimizer = *offload_target_of(offload_optimizer);
  p.offload_params = *offload_target_of(offload_params);
  // CLI11's choice check let only the three names through.
  p.precision = precision.empty() ? default_precision(c) : *precision_of(precision);
  // A tp the model cannot take is the cause to name, not the batch that the
  // dp left over from it fails to divide (tp 3 of 64 heads on 256 GPUs used
  // to be reported as "1024 is not a multiple of micro-batch × dp = 85").
  if (auto why = check_tensor_split(m, tp)) throw flag_error(*why);
  p.global_batch = global_batch > 0 ? global_batch : m.global_batch;
  // A batch the user did not give is said as the model file's (its
  // global_batch), not as a --global-batch never passed.
  const std::string batch_from =
      global_batch > 0 ? "--global-batch: " + std::to_string(p.global_batch)
                       : "the model's global_batch " + std::to_string(p.global_batch) + " (" + m.name +
                             "'s; --global-batch overrides it)";
  std::int64_t per_step = static_cast<std::int64_t>(p.micro_batch) * p.dp;
  if (p.global_batch % per_step != 0) {
    // A dp the user did not give is said with where it came from (a batch of
    // 2 on 8 CPU ranks with --cp 2 had read "micro-batch × dp = 4" unexplained).
    const std::int64_t idle = c.total_devices() - model_ways * p.dp;
    const std::string why =
        dp > 0 ? ""
               : " (dp defaulted to the " + std::to_string(c.total_devices()) + " devices / " +
                     std::to_string(model_ways) + " model-parallel ways = " + std::to_string(p.dp) +
                     (idle == 0 ? ": pass --dp, or a --global-batch that " + std::to_string(per_step) + " divides)"
                                : ", " + std::to_string(idle) + (idle == 1 ? " device" : " devices") +
                                      " idle: choose degrees whose product divides " +
                                      std::to_string(c.total_devices()) + ", or pass --dp)");
    throw InputError(batch_from + " is not a multiple of micro-batch × dp = " + std::to_string(per_step) + why);
  }
  // A plan file's bound on accumulation steps (and so an exact int).
  if (p.global_batch / per_step > (std::int64_t{1} << 24))
    throw InputError(batch_from + " / (micro-batch × dp = " +
                     std::to_string(per_step) + ") is " + std::to_string(p.global_batch / per_step) +
                     " accumulation steps; a plan holds at most 16777216 (2^24): raise --micro-batch or dp");
  p.grad_accum = static_cast<int>(p.global_batch / per_step);
  p.onebit_adam = onebit_adam;
  p.onebit_freeze_step = freeze_step;
  p.sparse_attention = *sparse_layout_of(sparse_attention);
  p.sparse_block = sparse_block;
  p.zeropp = zeropp;
  p.attention = *attention_kernel_of(attention);  // CLI::IsMember admitted only its names
  p.overlap_comm = !no_overlap;
  // The way the partition was given, to name in its errors.
  std::vector<std::string> ways;
  if (!stage_layers.empty()) ways.emplace_back("--stage-layers");
  if (!chunk_layers.empty()) ways.emplace_back("--chunk-layers");
  if (first_stage_layers > 0 || last_stage_layers > 0) ways.emplace_back("--first-stage-layers/--last-stage-layers");
  // The accounting flags as given (one or both).
  if (embedding_in_split || loss_in_split)
    ways.emplace_back(std::string(embedding_in_split ? "--account-for-embedding-in-pipeline-split" : "") +
                      (embedding_in_split && loss_in_split ? " and " : "") +
                      (loss_in_split ? "--account-for-loss-in-pipeline-split" : ""));
  if (ways.size() > 1)
    throw InputError(ways[0] + ", " + ways[1] + ": give one of the whole partition (--stage-layers, or "
                     "--chunk-layers by model chunk), --first-stage-layers/--last-stage-layers, or "
                     "--account-for-embedding/loss-in-pipeline-split");
  // One stage holds every layer: a partition has nothing to say (Megatron
  // refuses --decoder-first-pipeline-num-layers without a pipeline too).
  if (!ways.empty() && pp < 2) {
    if (stage_layers.size() > 1)
      throw InputError("--stage-layers: " + std::to_string(stage_layers.size()) + " stages given, one per pipeline "
                       "stage; expected --pp " + std::to_string(stage_layers.size()) + " beside them (--pp is " +
                       std::to_string(pp) + ")");
    throw InputError(ways[0] + ": a partition of pipeline stages; need --pp >= 2, got " + std::to_string(pp));
  }
  p.stage_layers = stage_layers;
  if (!chunk_layers.empty()) {
    p.chunk_layers = chunk_layers;
    p.stage_layers = stage_sums_of_chunks(chunk_layers, pp);
  }
  if (first_stage_layers > 0 || last_stage_layers > 0)
    p.stage_layers = stage_layers_from_ends(m.layers, pp, first_stage_layers, last_stage_layers);
  if (embedding_in_split || loss_in_split) {
    // Megatron-Core interleaves this layout with the embedding (or the loss) as
    // a chunk's layer, so the first (last) chunk is one layer short
    // (Plan::chunk_layers).
    if (p.virtual_stages > 1) {
      p.chunk_layers = chunk_layers_accounting(m.layers, pp, p.virtual_stages, embedding_in_split, loss_in_split);
      p.stage_layers = stage_sums_of_chunks(p.chunk_layers, pp);
    } else {
      p.stage_layers = stage_layers_accounting(m.layers, pp, embedding_in_split, loss_in_split);
    }
  }
  if (auto why = check_plan(p, m, c)) {
    // A partition the user gave by its ends or by counting the embedding is
    // named by those flags, not by --stage-layers.
    if ((why->starts_with("$.stage_layers") || why->starts_with("$.chunk_layers")) && !ways.empty() &&
        ways[0] != "--stage-layers" && ways[0] != "--chunk-layers")
      throw InputError(ways[0] + ": " + why->substr(why->find(": ") + 2));
    throw flag_error(*why);
  }
  return p;
}

}  // namespace ztune::cli
