#include "ztune/tuner/search_space.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/text.hpp"
#include "ztune/tuner/export.hpp"

namespace ztune {

int sequence_split_limit(int bound, const Transformer& m) {
  return bound > 0 ? bound : m.seq_len >= kContextParallelMinSeq ? kContextParallelMaxDefault : 1;
}

namespace {

// A plan file's bounds (plan.hpp, kMaxGlobalBatch and the others): the search only makes plans it can write.

std::string str(std::int64_t v) { return std::to_string(v); }

std::vector<int> device_counts(const SpaceOptions& o, int total) {
  if (o.gpus < 0 || o.min_gpus < 0 || o.max_gpus < 0) throw InputError("--gpus/--min-gpus/--max-gpus: expected > 0");
  if (o.gpus > 0 && (o.min_gpus > 0 || o.max_gpus > 0))
    throw InputError("--gpus: give either --gpus or --min-gpus/--max-gpus, not both");
  if (o.gpus > total)
    throw InputError("--gpus: " + str(o.gpus) + " exceeds the cluster's " + counted(total, "device"));
  if (o.gpus > 0) return {o.gpus};
  if (o.min_gpus == 0 && o.max_gpus == 0) return {total};
  int lo = o.min_gpus > 0 ? o.min_gpus : 1;
  int hi = o.max_gpus > 0 ? o.max_gpus : total;
  if (hi > total)
    throw InputError("--max-gpus: " + str(hi) + " exceeds the cluster's " + counted(total, "device"));
  if (lo > hi)
    throw InputError("--min-gpus: " + str(lo) + (o.max_gpus > 0 ? " is more than --max-gpus " + str(hi)
                                                                 : " exceeds the cluster's " + counted(total, "device")));
  std::vector<int> out;
  for (int g = lo; g <= hi; ++g) out.push_back(g);
  return out;
}

// The dense attention kernels searched. A fused kernel joins standard by
// default where the engine's kernel is the one the cost model prices:
// Megatron-LM (--use-flash-attn, or Transformer Engine's cuDNN attention),
// Megatron-DeepSpeed (--use-flash-attn-v2) and FSDP (SDPA) on Ampere or newer;
// ztune's executor its CPU kernel (cpu_executor_costs.cpp) and, with 16-bit
// storage, on GPUs cuDNN's fused attention (issue 24: CudnnAttention on the
// stored values). Which fused kernel is o.fused_kernel (preferred_fused_kernel).
// An fp32 plan's CUDA fused kernel is ztune's SIMT fp32 kernel, which can be
// far slower than the cuBLAS GEMMs of the standard path and is not the one
// priced: the ztune engine searches it for fp32 on GPUs only when --attention
// pins it.
std::vector<AttentionChoice> attention_kernels(const SpaceOptions& o, const Transformer& m, const Cluster& c,
                                              Precision precision) {
  // Where the kernel the plan names is the one the cost model prices: every
  // engine's but ztune's CUDA executor in fp32, whose fused attention is its
  // SIMT fp32 kernel (searched only when --attention pins it). With 16-bit
  // storage that executor runs cuDNN's fused attention on the stored values
  // (CudaBackend::attention_*_native), priced as every engine's.
  const bool available = engine_runs_flash(o.engine, m, c) && !fused_attention_unpriced(o, m, c, precision);
  if (o.attention) {
    const AttentionKernel k = *o.attention;
    const char* name = k == AttentionKernel::cudnn ? "cuDNN's fused attention" : "FlashAttention-2";
    if (fused_attention(k) && !supports_flash_attention(c))
      throw InputError(std::string("--attention: ") + to_string(k) + " needs an Ampere or newer GPU (" + name +
                       "); " + c.node.gpu.name + " is older");
    if (fused_attention(k) && !engine_runs_flash(o.engine, m, c))
      throw InputError(o.engine == Engine::ztune
                           ? "--attention: ztune's CUDA fused attention takes head sizes 64 and 128; " + m.name +
                                 " has " + str(m.head_dim())
                           : "--attention: " + std::string(name) + " takes head sizes that are multiples of 8 up to 256; " +
                                 m.name + " has " + str(m.head_dim()));
    // A kernel the engine cannot run (cuDNN's under DeepSpeed, eager under
    // torchtitan or ztune's executor): its rule, as engine_violation words it
    // for every plan, on a plan that differs from the default in the kernel only.
    Plan probe;
    probe.attention = k;
    if (auto rule = engine_violation(probe, o.engine))
      throw InputError("--attention: " + std::string(engine_rule_text(*rule)));
    return {{SparseLayout::none, k}};
  }
  if (!available) return {{SparseLayout::none, AttentionKernel::standard}};
  // A caller's cudnn with an engine that lacks it (SpaceOptions built by hand) falls back to FlashAttention-2.
  const AttentionKernel fused =
      o.fused_kernel == AttentionKernel::cudnn && !engine_runs_cudnn(o.engine) ? AttentionKernel::flash : o.fused_kernel;
  // torchtitan's context parallelism runs in SDPA's flash kernel only (its
  // rule fs_cp_attention): where the space has cp, flash beside cuDNN, or no
  // cp plan of an H100 search could run (audit50modes F5: "no plan fits").
  const bool may_have_cp = o.cp ? *o.cp > 1 : sequence_split_limit(o.max_cp, m) > 1;
  if (o.engine == Engine::fsdp && fused != AttentionKernel::flash && may_have_cp)
    return {{SparseLayout::none, AttentionKernel::standard},
            {SparseLayout::none, fused},
            {SparseLayout::none, AttentionKernel::flash}};
  return {{SparseLayout::none, AttentionKernel::standard}, {SparseLayout::none, fused}};
}

// The space is over the cap: say so with the numbers, what narrows it and how to raise it.
// (Plans of rejected layouts count too: the cap bounds the space, not only the work.)
std::string cap_message(const SpaceOptions& o, const std::vector<int>& counts, int reached, std::int64_t plans) {
  std::string range = counts.size() == 1 ? "the " + grouped(counts.front()) + " devices"
                                         : "device counts " + grouped(counts.front()) + ".." + grouped(counts.back());
  return "--max-plans: the plan space of " + range + " holds more than " + grouped(static_cast<double>(o.max_plans)) +
         " plans (the cap; " + grouped(static_cast<double>(plans)) + " counted up to " + grouped(reached) +
         " devices); narrow it with --gpus, --min-gpus/--max-gpus, --max-micro-batch or --precision, or raise the "
         "cap with --max-plans N (ranking takes up to 1 s per million plans per core)";
}

}  // namespace

bool fused_attention_unpriced(const SpaceOptions& o, const Transformer& m, const Cluster& c, Precision precision) {
  // ztune's CUDA executor in fp32 runs its SIMT fp32 fused kernel, not the one priced (attention_kernels).
  return o.engine == Engine::ztune && c.device_kind == DeviceKind::gpu && precision == Precision::fp32 &&
         engine_runs_flash(o.engine, m, c);
}

std::vector<Precision> searched_precisions(const SpaceOptions& o, const Cluster& c) {
  const bool cpu = c.device_kind == DeviceKind::cpu;
  auto supported = [&](Precision p) { return cpu ? p == Precision::fp32 : c.node.gpu.peak_flops(p) > 0; };
  if (o.precision) {
    if (!supported(*o.precision))
      throw InputError("--precision: " + to_string(*o.precision) + " is not supported by " +
                       (cpu ? std::string("the CPU backend (fp32 only)") : c.node.gpu.name));
    return {*o.precision};
  }
  // The default precision only (cluster.hpp default_precision): fp32 on CPU
  // ranks; on GPUs 16-bit mixed precision, as fp32 training is never faster
  // and the tuner searches for speed (pin --precision fp32 to see it). Where
  // both 16-bit formats exist they cost the same, so only bf16 is searched (it
  // needs no loss scaling); fp16 where bf16 is missing (V100). Pin --precision
  // fp16 for it.
  const Precision p = default_precision(c);
  if (!supported(p)) throw InputError("--cluster: " + c.node.gpu.name + " supports neither fp16 nor bf16; pin --precision");
  return {p};
}

SearchSpace::SearchSpace(const Transformer& m, const Cluster& c, const SpaceOptions& o,
                         const EnumerationHooks& hooks)
    : model_(&m), cluster_(&c), options_(o) {
  if (o.max_plans <= 0) throw InputError("--max-plans: expected a number of plans > 0");
  global_batch_ = o.global_batch > 0 ? o.global_batch : m.global_batch;
  if (global_batch_ <= 0)
    throw InputError("--global-batch: the model " + m.name + " has no default global_batch; give --global-batch");
  if (global_batch_ > kMaxGlobalBatch)
    throw InputError("--global-batch: " + str(global_batch_) + " is more than a plan holds (at most 2^40 = " +
                     str(kMaxGlobalBatch) + " sequences)");
  if (o.max_micro_batch < 0) throw InputError("--max-micro-batch: expected > 0");
  if (o.tp && *o.tp < 1) throw InputError("--tp: expected >= 1, got " + str(*o.tp));
  if (o.pp && *o.pp < 1) throw InputError("--pp: expected >= 1, got " + str(*o.pp));
  if (o.cp && *o.cp < 1) throw InputError("--cp: expected >= 1, got " + str(*o.cp));
  if (o.cp && *o.cp > 1 && m.seq_len % (2 * *o.cp) != 0)
    throw InputError("--cp: " + str(*o.cp) + " context-parallel ranks cut each sequence into 2·cp = " +
                     str(2 * *o.cp) + " load-balanced chunks, which do not divide the sequence length " +
                     str(m.seq_len) + "; expected 2·cp to divide " + str(m.seq_len));
  if (o.max_cp < 0) throw InputError("--max-cp: expected >= 1, got " + str(o.max_cp));
  if (o.cp && o.max_cp > 0 && *o.cp > o.max_cp)
    throw InputError("--cp: " + str(*o.cp) + " is above --max-cp " + str(o.max_cp) + "; expected one of them");
  if (o.ulysses && *o.ulysses < 1) throw InputError("--ulysses: expected >= 1, got " + str(*o.ulysses));
  if (o.ulysses && *o.ulysses > 1) {
    if (o.engine == Engine::megatron || o.engine == Engine::fsdp)
      throw InputError("--ulysses: " + to_string(o.engine) +
                       " has no DeepSpeed-Ulysses (it splits sequences with context parallelism: --cp); expected "
                       "--engine deepspeed or ztune");
    if (o.cp && *o.cp > 1)
      throw InputError("--ulysses: DeepSpeed-Ulysses and context parallelism (--cp " + str(*o.cp) +
                       ") do not combine (Megatron-DeepSpeed refuses both); pin one of them");
    if (m.seq_len % *o.ulysses != 0)
      throw InputError("--ulysses: " + str(*o.ulysses) + " Ulysses ranks do not divide the sequence length " +
                       str(m.seq_len));
    if (m.heads % *o.ulysses != 0 || m.kv_heads % *o.ulysses != 0)
      throw InputError("--ulysses: " + str(*o.ulysses) + " Ulysses ranks do not divide the model's " +
                       str(m.heads) + " heads and " + str(m.kv_heads) +
                       " KV heads (the all-to-all scatters whole heads)");
  }
  if (o.max_ulysses < 0) throw InputError("--max-ulysses: expected >= 1, got " + str(o.max_ulysses));
  if (o.ulysses && o.max_ulysses > 0 && *o.ulysses > o.max_ulysses)
    throw InputError("--ulysses: " + str(*o.ulysses) + " is above --max-ulysses " + str(o.max_ulysses) +
                     "; expected one of them");
  // A pinned mode the engine cannot run on these devices (ztune's executor on
  // GPUs: its rules with the cluster): said once, not as "no plan fits".
  {
    Plan probe;
    probe.dp = 4;
    probe.zero_stage = 3;
    auto refuse = [&](const std::string& flag, const Plan& p) {
      if (const auto rule = engine_violation(p, o.engine, c))
        throw InputError(flag + ": " + std::string(engine_rule_text(*rule)));
    };
    if (o.cp && *o.cp > 1) {
      Plan p = probe;
      p.cp = *o.cp;
      p.attention = AttentionKernel::flash;  // the kernel every engine's cp runs in (the space picks it)
      refuse("--cp " + str(*o.cp), p);
    }
    if (o.ulysses && *o.ulysses > 1) {
      Plan p = probe;
      p.ulysses = *o.ulysses;
      refuse("--ulysses " + str(*o.ulysses), p);
    }
    if (o.dp_shard) {
      Plan p = probe;
      p.dp_shard = 2;
      refuse("--dp-shard " + str(*o.dp_shard), p);
    }
    Plan cp2 = probe;
    cp2.cp = 2;
    cpu_backend_modes_only_ = engine_violation(cp2, o.engine, c) == EngineRule::zt_cuda_context_parallel;
  }
  if (o.dp_shard && *o.dp_shard < 2)
    throw InputError("--dp-shard: expected a shard group of 2 or more data-parallel ranks, got " + str(*o.dp_shard));
  if (o.dp_shard && o.zero_stage && *o.zero_stage != 3)
    throw InputError("--dp-shard: hybrid sharding is ZeRO-3 sharded in groups; it needs --zero 3, got --zero " +
                     str(*o.zero_stage));
  if (o.zero_stage && (*o.zero_stage < 0 || *o.zero_stage > 3))
    throw InputError("--zero: expected 0, 1, 2 or 3, got " + str(*o.zero_stage));
  // A stage the engine cannot run (FSDP has no ZeRO-1): said once, not as
  // "no plan fits" after the whole space. Probed on two replicas, as nothing
  // else of a plan changes which stages an engine has.
  if (o.zero_stage) {
    Plan probe;
    probe.dp = 2;
    probe.zero_stage = *o.zero_stage;
    if (const auto rule = engine_violation(probe, o.engine))
      throw InputError("--zero: " + std::string(engine_rule_text(*rule)));
    // With a pinned pipeline too: a stage no engine runs under one (ZeRO-2),
    // or this engine does not (DeepSpeed's pipeline: 0 or 1; Megatron-FSDP:
    // none), is said once; it had read "no plan fits", with more GPUs offered.
    if (o.pp && *o.pp > 1) {
      probe.pp = *o.pp;
      probe.grad_accum = *o.pp;
      probe.global_batch = 2LL * *o.pp;
      constexpr std::string_view field = "$.zero_stage: ";
      if (const auto why = check_plan_shape(probe, m); why && why->starts_with(field))
        throw InputError("--zero: " + why->substr(field.size()));
      if (const auto rule = engine_violation(probe, o.engine))
        throw InputError("--zero " + str(*o.zero_stage) + " with --pp " + str(*o.pp) + ": " +
                         std::string(engine_rule_text(*rule)));
    }
  }
  gpu_counts_ = device_counts(o, c.total_devices());
  precisions_ = searched_precisions(o, c);
  if (o.grad_reduce_dtype && *o.grad_reduce_dtype != Precision::fp32) {
    // A 16-bit reduction is the training precision's (check_plan_shape).
    if (std::find(precisions_.begin(), precisions_.end(), *o.grad_reduce_dtype) == precisions_.end())
      throw InputError("--grad-reduce-dtype: a " + to_string(*o.grad_reduce_dtype) + " reduction needs " +
                       to_string(*o.grad_reduce_dtype) + " training, and the search's precision is " +
                       to_string(precisions_.front()) + " (pin --precision " + to_string(*o.grad_reduce_dtype) +
                       ", or expected fp32)");
    precisions_ = {*o.grad_reduce_dtype};
  }
  // 16-bit optimizer states are Megatron-Core's and NeMo's: the other engines
  // would refuse every plan of the space, so say why once.
  {
    Plan probe;
    probe.master_dtype = o.master_dtype;
    probe.moments_dtype = o.moments_dtype;
    probe.param_remainders = o.param_remainders;
    optimizer16_ = probe.low_precision_optimizer();
    if (optimizer16_)
      if (const auto rule = engine_violation(probe, o.engine))
        throw InputError("--master-dtype/--moments-dtype: " + std::string(engine_rule_text(*rule)));
  }
  // An fp32 plan's parameters are their own master (check_plan_shape).
  if (o.master_dtype != Precision::fp32 && precisions_.front() == Precision::fp32)
    throw InputError("--master-dtype: an fp32 plan's parameters are the optimizer's master copy, and the search's "
                     "precision is fp32 (pin --precision bf16 or fp16, or expected fp32)");
  if (o.param_remainders && (precisions_.front() != Precision::bf16 || o.master_dtype != Precision::fp32))
    throw InputError("--param-remainders: completes an fp32 master from its bf16 parameter; needs bf16 training "
                     "and --master-dtype fp32, and the search's are " + to_string(precisions_.front()) + " and " +
                     to_string(o.master_dtype));
  // FP8 plans: said once, where no plan of the space could run one.
  if (o.fp8 != Fp8Recipe::none) {
    Plan probe;
    probe.fp8 = o.fp8;
    probe.precision = precisions_.front();
    probe.zero_stage = o.zero_stage.value_or(0);  // a pinned stage the engine runs no FP8 under
    if (const auto why = check_plan(probe, m, c); why && why->starts_with("$.fp8"))
      throw InputError("--fp8: " + why->substr(std::string_view("$.fp8: ").size()));
    if (const auto rule = engine_violation(probe, o.engine)) throw InputError("--fp8: " + std::string(engine_rule_text(*rule)));
  }
  // FP8 parameters: likewise, on a probe sharded as the engine shards (the
  // megatron engine keeps them under its distributed optimizer, ZeRO-1, and
  // its rule drops the space's other stages; FSDP shards fully).
  if (o.fp8_param_gather) {
    Plan probe;
    probe.fp8 = o.fp8;
    probe.fp8_param_gather = true;
    probe.param_remainders = o.param_remainders;
    probe.precision = precisions_.front();
    probe.zero_stage = o.zero_stage.value_or(o.engine == Engine::fsdp ? 3 : 1);
    if (o.fp8 == Fp8Recipe::none)
      throw InputError("--fp8-param-gather: keeps the linear layers' weights in FP8; needs --fp8 delayed or "
                       "tensorwise");
    if (const auto why = check_plan(probe, m, c); why && why->starts_with("$.fp8_param_gather"))
      throw InputError("--fp8-param-gather: " + why->substr(std::string_view("$.fp8_param_gather: ").size()));
    if (const auto rule = engine_violation(probe, o.engine))
      throw InputError("--fp8-param-gather: " + std::string(engine_rule_text(*rule)));
  }
  attention_ = attention_kernels(o, m, c, precisions_.front());
  tp_comm_overlap_ = o.engine == Engine::megatron && supports_transformer_engine(c) && o.tp_comm_overlap;
  // DeepSpeed's CPU checkpointing, for its full-recomputation plans on GPUs
  // (the other engines keep their checkpoints on the device: engine.cpp).
  cpu_checkpointing_ = o.engine == Engine::deepspeed && c.device_kind == DeviceKind::gpu;
  // torchtitan's selective checkpointing is op-level (its selective_ac_option
  // "op", what its Llama configurations set): ztune's alternate_mm.
  selective_policy_ = o.engine == Engine::fsdp ? SelectivePolicy::alternate_mm : SelectivePolicy::attention;
  recomputes_ = o.recompute ? std::vector<Recompute>{*o.recompute}
                            : std::vector<Recompute>(std::begin(kRecomputeModes), std::end(kRecomputeModes));
  // ZeRO-3 under a pipeline where the engine runs it (FSDP2 under
  // torch.distributed.pipelining, ztune's executor; DeepSpeed's and
  // Megatron's pipelines refuse it): its rule decides, on a probe.
  {
    Plan probe;
    probe.pp = 2;
    probe.dp = 2;
    probe.zero_stage = 3;
    pipelined_zero3_ = !engine_violation(probe, o.engine);
  }
  if (o.sparse_attention != SparseLayout::none) {
    if (o.sparse_block < 16 || o.sparse_block > 128)
      throw InputError("--sparse-block: " + str(o.sparse_block) + " is outside 16..128");
    if (m.seq_len % o.sparse_block != 0)
      throw InputError("--sparse-block: " + str(o.sparse_block) + " does not divide the sequence length " +
                       str(m.seq_len));
    attention_.push_back({o.sparse_attention, AttentionKernel::standard});
  }
  if (o.onebit_freeze_step >= 0) {
    freeze_step_ = o.onebit_freeze_step;
  } else {
    // The same run length onebit_adam_phases() averages over.
    const double tokens_per_step = static_cast<double>(global_batch_) * static_cast<double>(m.seq_len);
    const double run_steps = m.train_tokens > 0 ? std::ceil(m.train_tokens / tokens_per_step) : 0;
    freeze_step_ = static_cast<int>(std::min(std::ceil(kOnebitWarmupFraction * run_steps), double{1 << 30}));
  }
  // Layouts by device count, then tp and pp ascending: ids number the space in this
  // order. The divisors of g / tp are those of g that divide it (no second trial division).
  using Clock = std::chrono::steady_clock;
  auto last_report = Clock::now();
  const auto counts_total = static_cast<std::int64_t>(gpu_counts_.size());
  std::int64_t counts_done = 0;
  std::int64_t next_id = 0;
  for (int g : gpu_counts_) {
    if (hooks.stop != nullptr && hooks.stop->load(std::memory_order_relaxed)) {
      interrupted_ = true;
      break;
    }
    if (hooks.progress) {
      const auto now = Clock::now();
      if (now - last_report >= std::chrono::milliseconds(100)) {
        last_report = now;
        hooks.progress(counts_done, counts_total, next_id);
      }
    }
    const std::vector<int> divs = divisors(g);
    for (int tp : divs) {
      if (o.tp && tp != *o.tp) continue;
      for (int cp : context_parallel_degrees(g / tp))
      for (int u : cp == 1 ? ulysses_degrees(tp, g / tp) : std::vector<int>{1}) {
        const int rest = g / tp / cp / u;
        for (int pp : divs) {
          if (pp > rest) break;
          if (rest % pp != 0) continue;
          if (o.pp && pp != *o.pp) continue;
          Layout l;
          l.gpus = g;
          l.tp = tp;
          l.cp = cp;
          l.ulysses = u;
          l.pp = pp;
          l.dp = rest / pp;
          // dp must divide the global batch: micro_batch × grad_accum × dp = B is
          // the definition of a step, so such layouts are not plans at all
          // (context parallelism consumes no batch).
          if (global_batch_ % l.dp != 0) continue;
          l.plans = count_plans(l);
          l.first_id = next_id;
          next_id += l.plans;
          if (next_id > o.max_plans) throw PlanSpaceOverCap(cap_message(o, gpu_counts_, g, next_id));
          classify(l);
          layouts_.push_back(std::move(l));
        }
      }
    }
    ++counts_done;
  }
  size_ = next_id;
}

std::vector<int> SearchSpace::context_parallel_degrees(int rest) const {
  // A pinned Ulysses degree splits the sequence itself, and cp does not combine
  // with it: its layouts have no cp (they had been searched with cp and
  // Ulysses 1, the pin dropped without a word, where cp entered the space).
  if (options_.ulysses && *options_.ulysses > 1) return {1};
  if (options_.cp) {
    if (rest % *options_.cp != 0) return {};
    return {*options_.cp};
  }
  if (cpu_backend_modes_only_) return {1};
  const int limit = sequence_split_limit(options_.max_cp, *model_);
  std::vector<int> out{1};
  for (int c = 2; c <= limit && c <= rest; ++c)
    if (rest % c == 0 && model_->seq_len % (2 * c) == 0) out.push_back(c);
  return out;
}

std::vector<int> SearchSpace::ulysses_degrees(int tp, int rest) const {
  const Transformer& m = *model_;
  const int kv_local = m.kv_heads >= tp ? m.kv_heads / tp : 1;
  auto fits = [&](int u) {
    return rest % u == 0 && m.seq_len % u == 0 && m.heads % (tp * u) == 0 && kv_local % u == 0;
  };
  if (options_.ulysses) {
    if (!fits(*options_.ulysses)) return {};
    return {*options_.ulysses};
  }
  if (options_.engine == Engine::megatron || options_.engine == Engine::fsdp || cpu_backend_modes_only_) return {1};
  const int limit = sequence_split_limit(options_.max_ulysses, m);
  std::vector<int> out{1};
  for (int u = 2; u <= limit && u <= rest; ++u)
    if (fits(u)) out.push_back(u);
  return out;
}

void SearchSpace::classify(Layout& l) const {
  const int per_node = cluster_->node.gpus;
  if (!options_.allow_tp_across_nodes && (l.tp > per_node || per_node % l.tp != 0)) {
    l.rejected = LayoutRule::tp_across_nodes;
    return;
  }
  // Megatron-LM, Megatron-DeepSpeed and torchtitan start through torchrun or
  // the deepspeed launcher, tensor-parallel groups inside a node (export.hpp
  // plan_launch: whole nodes and a smaller last one, 250 GPUs of 16-GPU nodes
  // at tp 2 as 15 × 16 + 10). A layout no such launch holds (tp 3 across
  // nodes of 16 with --allow-tp-across-nodes, on too few nodes) is no plan for
  // them: `ztune export` would refuse it. ztune's own executor starts any
  // count (mpirun, a host file's slots).
  if (options_.engine != Engine::ztune && cluster_->device_kind == DeviceKind::gpu &&
      !plan_launch(l.gpus, l.tp, per_node, cluster_->nodes)) {
    l.rejected = LayoutRule::unlaunchable;
    l.reason = std::to_string(l.gpus) + " devices at tp " + std::to_string(l.tp) + " cannot start on at most " +
               std::to_string(cluster_->nodes) + " nodes of " + std::to_string(per_node) +
               " with each tensor-parallel group inside a node (torchrun, the deepspeed launcher)";
    return;
  }
  Plan rep;
  rep.dp = l.dp;
  rep.tp = l.tp;
  rep.pp = l.pp;
  rep.cp = l.cp;
  rep.ulysses = l.ulysses;
  // Only the layout's shape is judged here: one sequence per replica (the batch
  // itself may not fit a plan's int fields: --global-batch 2^32).
  rep.global_batch = l.dp;
  rep.micro_batch = 1;
  rep.grad_accum = 1;
  rep.precision = precisions_.front();
  rep.fp8 = options_.fp8;  // FP8's dimension rule depends on tp alone: judged per layout
  if (auto why = check_plan(rep, *model_, *cluster_)) {
    l.reason = *why;
    if (why->starts_with("$.tp")) l.rejected = LayoutRule::tp_shape;
    else if (why->starts_with("$.pp")) l.rejected = LayoutRule::pp_layers;
    else if (why->starts_with("$.fp8")) l.rejected = LayoutRule::fp8_shape;
    else l.rejected = LayoutRule::other;
  }
}

std::vector<ScheduleChoice> SearchSpace::schedules(const Layout& l) const {
  if (l.pp == 1) return {{Schedule::one_f_one_b, 1}};
  std::vector<ScheduleChoice> out{{Schedule::gpipe, 1}, {Schedule::one_f_one_b, 1}};
  if (model_->layers % l.pp == 0)
    for (int v : divisors(model_->layers / l.pp))
      if (v > 1) out.push_back({Schedule::interleaved, v});
  // Megatron-Core interleaves where pp does not divide the layers by counting
  // the embedding and the loss as layers (Llama 3.1 405B's 126 + 2 over pp 16
  // × vp 8): pp × vp must divide layers + 2 (chunk_layers_accounting).
  const int counted = model_->layers + 2;
  if (options_.engine == Engine::megatron && model_->layers % l.pp != 0 && counted % l.pp == 0)
    for (int v : divisors(counted / l.pp))
      if (v > 1)
        out.push_back({Schedule::interleaved, v, chunk_layers_accounting(model_->layers, l.pp, v, true, true)});
  return out;
}

// With one data-parallel rank there is nothing to partition or compress: ZeRO
// stages 1-3 without offload are stage 0 (stage 3 only adds its gather buffer),
// and 1-bit Adam and ZeRO++ change only data-parallel traffic. Those plans are
// left out rather than listed as duplicates of stage 0 (unless a pinned --zero
// or FP8 parameters ask for the stage: all_states); the offload variants
// stay, because where the states live and when gradients move differ by stage.
std::vector<StateChoice> SearchSpace::states(const Layout& l) const {
  std::vector<StateChoice> all = all_states(l);
  if (options_.zero_stage) std::erase_if(all, [&](const StateChoice& s) { return s.zero_stage != *options_.zero_stage; });
  if (options_.dp_shard) std::erase_if(all, [&](const StateChoice& s) { return s.dp_shard != *options_.dp_shard; });
  // Megatron-LM's ZeRO-2/3 (Megatron-FSDP) is priced and exported, and searched
  // when --zero pins it; otherwise a megatron search keeps to the distributed
  // optimizer its published runs use (no run in data/validation prices it).
  if (options_.engine == Engine::megatron && !options_.zero_stage)
    std::erase_if(all, [](const StateChoice& s) { return s.zero_stage >= 2; });
  // 16-bit optimizer states stay on the GPU and are not 1-bit Adam's (check_plan_shape).
  if (optimizer16_)
    std::erase_if(all,
                  [](const StateChoice& s) { return s.offload_optimizer != OffloadTarget::none || s.onebit_adam; });
  return all;
}

std::vector<int> SearchSpace::shard_group_sizes(const Layout& l) const {
  const int group = l.dp * l.cp * l.ulysses;  // the weights' data-parallel group (dp_cp())
  if (options_.dp_shard) {
    const int n = *options_.dp_shard;
    if (n >= 2 && n < group && group % n == 0) return {n};
    return {};
  }
  if (cpu_backend_modes_only_) return {};
  const int gpn = std::max(1, cluster_->node.gpus);
  const int node_ranks = l.tp >= gpn ? 1 : gpn / l.tp;  // the weights' dp ranks on one node
  std::vector<int> out;
  if (group <= node_ranks) return out;  // the group is inside a node: nothing to replicate across
  for (int k : kHybridShardNodeMultiples) {
    const int n = node_ranks * k;
    if (n >= 2 && n < group && group % n == 0) out.push_back(n);
  }
  return out;
}

std::vector<StateChoice> SearchSpace::all_states(const Layout& l) const {
  // Context-parallel ranks hold the same weights: ZeRO partitions over dp × cp.
  const bool partitioned = l.dp * l.cp * l.ulysses > 1;
  // With one replica a stage without offload is stage 0 (states()), unless a
  // plan needs the stage itself: a pinned --zero, and FP8 parameters, which
  // live under Megatron's distributed optimizer (ZeRO-1).
  auto wanted = [&](int stage) {
    return (options_.zero_stage && *options_.zero_stage == stage) || (stage == 1 && options_.fp8_param_gather);
  };
  std::vector<StateChoice> out;
  out.push_back({0, OffloadTarget::none, OffloadTarget::none, false, false});
  // Hybrid sharding: ZeRO-3 without ZeRO++ or 1-bit Adam (offload only with FSDP, below), in shard
  // groups of shard_group_sizes (the plain ZeRO-3 choices are kept beside).
  const std::vector<int> shards = l.pp == 1 || pipelined_zero3_ ? shard_group_sizes(l) : std::vector<int>{};
  // Under a pipeline: ZeRO 0/1, and 3 held through the step where the engine
  // runs it; no ZeRO-2, offload or ZeRO++ (check_plan).
  auto pipelined = [&] {
    if (pipelined_zero3_ && partitioned) {
      out.push_back({3, OffloadTarget::none, OffloadTarget::none, false, false});
      for (int n : shards) out.push_back({3, OffloadTarget::none, OffloadTarget::none, false, false, n});
    }
    return out;
  };
  if (l.cp > 1) {
    // Context parallelism without offload, 1-bit Adam or ZeRO++ (check_plan_shape).
    out.push_back({1, OffloadTarget::none, OffloadTarget::none, false, false});
    if (l.pp > 1) return pipelined();
    out.push_back({2, OffloadTarget::none, OffloadTarget::none, false, false});
    out.push_back({3, OffloadTarget::none, OffloadTarget::none, false, false});
    for (int n : shards) out.push_back({3, OffloadTarget::none, OffloadTarget::none, false, false, n});
    return out;
  }
  // DeepSpeed-Ulysses without 1-bit Adam or ZeRO++ (check_plan_shape).
  if (options_.include_onebit_adam && partitioned && l.ulysses == 1)
    out.push_back({0, OffloadTarget::none, OffloadTarget::none, true, false});
  if (partitioned || wanted(1)) out.push_back({1, OffloadTarget::none, OffloadTarget::none, false, false});
  if (l.pp > 1) return pipelined();
  const bool offload = cluster_->device_kind == DeviceKind::gpu;
  const bool nvme = offload && cluster_->node.nvme_size_tb > 0;
  if (offload) out.push_back({1, OffloadTarget::cpu, OffloadTarget::none, false, false});
  if (partitioned || wanted(2)) out.push_back({2, OffloadTarget::none, OffloadTarget::none, false, false});
  if (offload) out.push_back({2, OffloadTarget::cpu, OffloadTarget::none, false, false});
  std::vector<OffloadTarget> targets{OffloadTarget::none};
  if (offload) targets.push_back(OffloadTarget::cpu);
  if (nvme) targets.push_back(OffloadTarget::nvme);
  for (bool zpp : {false, true}) {
    if (zpp && (!options_.include_zeropp || !partitioned || l.ulysses > 1)) continue;
    for (OffloadTarget opt : targets)
      for (OffloadTarget par : targets)
        if (partitioned || opt != OffloadTarget::none || par != OffloadTarget::none || (wanted(3) && !zpp))
          out.push_back({3, opt, par, false, zpp});
  }
  for (int n : shards) {
    out.push_back({3, OffloadTarget::none, OffloadTarget::none, false, false, n});
    // FSDP's HYBRID_SHARD with CPUOffload, which moves the parameters with the
    // optimizer (its only offload): the largest models on few nodes (audit50modes
    // F12: predict priced it, the search never offered it). ztune's executor
    // keeps hybrid-sharded states on the device; the other engines have no hybrid.
    if (offload && options_.engine == Engine::fsdp)
      out.push_back({3, OffloadTarget::cpu, OffloadTarget::cpu, false, false, n});
  }
  return out;
}

std::vector<int> SearchSpace::micro_batches(const Layout& l) const {
  // A micro-batch and its accumulation steps must fit a plan: the plan file's
  // bounds (micro_batch <= 2^20, grad_accum <= 2^24) keep both exact ints, so a
  // per-rank batch beyond int (--global-batch 2^32: a divisor cast to int was 0,
  // and a modulo by it SIGFPE) is safe. Divisors up to sqrt: at most 2^20 steps.
  const std::int64_t per_rank = global_batch_ / l.dp;
  std::vector<int> small, large;
  auto keep = [&](std::int64_t mb, std::vector<int>& to) {
    if (mb <= kMaxMicroBatch && per_rank / mb <= kMaxGradAccum &&
        (options_.max_micro_batch == 0 || mb <= options_.max_micro_batch))
      to.push_back(static_cast<int>(mb));
  };
  for (std::int64_t d = 1; d * d <= per_rank && d <= kMaxMicroBatch; ++d) {
    if (per_rank % d != 0) continue;
    keep(d, small);
    if (d != per_rank / d) keep(per_rank / d, large);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

std::vector<int> SearchSpace::micro_batches_for(const Layout& l, const ScheduleChoice& s) const {
  auto mbs = micro_batches(l);
  if (s.schedule != Schedule::interleaved) return mbs;
  const std::int64_t per_rank = global_batch_ / l.dp;
  std::erase_if(mbs, [&](int mb) { return (per_rank / mb) % l.pp != 0; });
  return mbs;
}

std::vector<ActivationSplit> SearchSpace::activation_splits(const Layout& l) const {
  if (l.tp < 2) return {ActivationSplit::none};
  const bool pa = options_.engine == Engine::deepspeed || options_.engine == Engine::megatron;
  // Megatron's sequence parallelism does not combine with Ulysses
  // (check_plan_shape), and --no-sequence-parallel leaves it out.
  const bool sp = l.ulysses == 1 && options_.sequence_parallel;
  std::vector<ActivationSplit> out{ActivationSplit::none};
  if (sp) out.push_back(ActivationSplit::sequence_parallel);
  if (pa) out.push_back(ActivationSplit::partitioned);
  return out;
}

std::int64_t SearchSpace::count_plans(const Layout& l) const {
  const auto n_states = static_cast<std::int64_t>(states(l).size());
  const auto n_prec = static_cast<std::int64_t>(precisions_.size());
  std::int64_t n_split_rc_att = 0;  // (split, recompute, attention) triples in the space
  for (ActivationSplit split : activation_splits(l))
    for (Recompute rc : recomputes_) {
      const SelectivePolicy sp = rc == Recompute::selective ? selective_policy_ : SelectivePolicy::attention;
      for (const auto& at : attention_)
        n_split_rc_att +=
            split_fits(split, rc) && recompute_fits(rc, sp, at) && cp_fits(l, at) ? checkpoint_homes(rc) : 0;
    }
  std::int64_t n = 0;
  for (const auto& s : schedules(l))
    n += n_split_rc_att * n_states * static_cast<std::int64_t>(micro_batches_for(l, s).size()) * n_prec;
  return n;
}

std::vector<OptionPlans> plans_added_by_options(const Transformer& m, const Cluster& c, const SpaceOptions& o) {
  std::vector<OptionPlans> out;
  // Each count lays the space out again (a minute for millions of device
  // counts): none without an opt-in.
  if (!o.include_onebit_adam && !o.include_zeropp && o.sparse_attention == SparseLayout::none) return out;
  const std::int64_t all = SearchSpace(m, c, o).size();
  auto without = [&](const std::string& flag, auto&& clear) {
    SpaceOptions w = o;
    clear(w);
    out.push_back({flag, all - SearchSpace(m, c, w).size()});
  };
  if (o.include_onebit_adam) without("--onebit-adam", [](SpaceOptions& w) { w.include_onebit_adam = false; });
  if (o.include_zeropp) without("--zeropp", [](SpaceOptions& w) { w.include_zeropp = false; });
  if (o.sparse_attention != SparseLayout::none)
    without("--sparse-attention " + to_string(o.sparse_attention),
            [](SpaceOptions& w) { w.sparse_attention = SparseLayout::none; });
  return out;
}

}  // namespace ztune
