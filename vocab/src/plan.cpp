#include "ztune/vocab/plan.hpp"

#include <algorithm>
#include <cmath>
#include <cassert>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <span>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/json_reader.hpp"

namespace ztune {


std::string to_string(AttentionKernel k) { return name_in(kAttentionKernelNames, k); }
std::string to_string(OffloadTarget o) { return name_in(kOffloadTargetNames, o); }
std::string to_string(Recompute r) { return name_in(kRecomputeNames, r); }
std::string to_string(Schedule s) { return name_in(kScheduleNames, s); }
std::string to_string(SparseLayout l) { return name_in(kSparseLayoutNames, l); }
std::optional<OffloadTarget> offload_target_of(std::string_view n) { return value_in<OffloadTarget>(kOffloadTargetNames, n); }
std::optional<Recompute> recompute_of(std::string_view n) { return value_in<Recompute>(kRecomputeNames, n); }
std::optional<Schedule> schedule_of(std::string_view n) { return value_in<Schedule>(kScheduleNames, n); }
std::optional<SparseLayout> sparse_layout_of(std::string_view n) { return value_in<SparseLayout>(kSparseLayoutNames, n); }
std::optional<AttentionKernel> attention_kernel_of(std::string_view n) {
  return value_in<AttentionKernel>(kAttentionKernelNames, n);
}
std::string to_string(Fp8Recipe r) { return name_in(kFp8RecipeNames, r); }
std::optional<Fp8Recipe> fp8_recipe_of(std::string_view n) { return value_in<Fp8Recipe>(kFp8RecipeNames, n); }
std::string to_string(SelectivePolicy sp) { return name_in(kSelectivePolicyNames, sp); }
std::optional<SelectivePolicy> selective_policy_of(std::string_view n) {
  return value_in<SelectivePolicy>(kSelectivePolicyNames, n);
}

std::string recompute_text(const Plan& p) {
  if (p.recompute_num_layers > 0) return to_string(p.recompute) + ":block" + std::to_string(p.recompute_num_layers);
  if (p.recompute_policy == SelectivePolicy::attention) return to_string(p.recompute);
  std::string s = to_string(p.recompute) + ":" + to_string(p.recompute_policy);
  if (p.recompute_policy == SelectivePolicy::alternate_layers && p.recompute_every != 2)
    s += "/" + std::to_string(p.recompute_every);  // every k-th layer
  return s;
}

namespace {

/// "st", "nd", "rd" or "th" after a count: 1st, 2nd, 3rd, 11th, 21st.
const char* ordinal_suffix(int n) {
  const int tens = n % 100, units = n % 10;
  if (tens >= 11 && tens <= 13) return "th";
  return units == 1 ? "st" : units == 2 ? "nd" : units == 3 ? "rd" : "th";
}

std::int64_t saturating_product(std::initializer_list<int> factors) {
  std::int64_t n = 1;
  for (const int d : factors) {
    if (d <= 0) return 0;
    if (n > kPlanDevicesSaturated / d) return kPlanDevicesSaturated;
    n *= d;
  }
  return n;
}

}  // namespace

std::int64_t Plan::devices() const { return saturating_product({dp, tp, cp, ulysses, pp}); }
std::int64_t Plan::sequences_per_step() const { return saturating_product({micro_batch, grad_accum, dp}); }

std::string Plan::summary() const {
  std::ostringstream os;
  os << "dp" << dp << "×tp" << tp;
  if (cp > 1) os << "×cp" << cp;
  if (ulysses > 1) os << "×u" << ulysses;
  os << "×pp" << pp;
  if (virtual_stages > 1) os << "×v" << virtual_stages;  // the pipeline's chunks, beside pp
  if (dp_shard > 0) os << " shard" << dp_shard;
  os << " z" << zero_stage;
  if (offload_optimizer != OffloadTarget::none) os << " opt→" << to_string(offload_optimizer);
  if (offload_params != OffloadTarget::none) os << " par→" << to_string(offload_params);
  os << " mb" << micro_batch << "×" << grad_accum << " " << recompute_text(*this);
  if (sequence_parallel) os << (tp_comm_overlap ? " sp+overlap" : " sp");
  if (!reduce_scatter) os << " grad-allreduce";
  if (partition_activations) os << " pa";
  if (cpu_checkpointing) os << " ckpt→cpu";
  if (pp > 1) os << " " << to_string(schedule);
  os << " " << to_string(precision);
  if (grad_reduce_dtype) os << " grad-reduce:" << to_string(*grad_reduce_dtype);
  if (low_precision_optimizer())
    os << " adam:" << (param_remainders ? "fp32-rem" : to_string(master_dtype)) << "/" << to_string(moments_dtype);
  if (onebit_adam) os << " 1bit-adam";
  if (sparse_attention != SparseLayout::none) os << " sparse:" << to_string(sparse_attention) << "/" << sparse_block;
  if (attention != AttentionKernel::standard) os << " " << to_string(attention);
  if (fp8 != Fp8Recipe::none) os << " fp8:" << to_string(fp8) << (fp8_param_gather ? "+params" : "");
  if (!bias_fusion) os << " unfused-bias";
  if (zeropp) os << " zero++";
  if (!stage_layers.empty()) {
    os << " stages:";
    for (std::size_t i = 0; i < stage_layers.size(); ++i) os << (i ? "+" : "") << stage_layers[i];
  }
  if (!chunk_layers.empty()) {
    // Runs of equal chunks as "n×k": the 405B's 128 chunks read "0+1×126+0".
    os << " chunks:";
    for (std::size_t i = 0; i < chunk_layers.size();) {
      std::size_t j = i;
      while (j < chunk_layers.size() && chunk_layers[j] == chunk_layers[i]) ++j;
      os << (i ? "+" : "") << chunk_layers[i];
      if (j - i > 1) os << "×" << (j - i);
      i = j;
    }
  }
  return os.str();
}

int partition_layer_count(const std::vector<int>& stated, int layers, int pp, int stage) {
  // A stated partition has one entry per stage (check_plan_shape); the cost
  // model is only called on checked plans.
  assert(stated.empty() || stated.size() == static_cast<std::size_t>(pp));
  if (!stated.empty()) return stated[static_cast<std::size_t>(stage)];
  return layers / pp + (stage < layers % pp ? 1 : 0);
}

int stage_layer_count(const Plan& p, int layers, int stage) {
  return partition_layer_count(p.stage_layers, layers, p.pp, stage);
}

int recomputed_layers(const Plan& p, int stage_layers) {
  if (p.recompute != Recompute::full || p.recompute_num_layers <= 0) return stage_layers;
  // Megatron-Core's block method counts within each model chunk (its
  // TransformerBlock). A stage's chunks are equal, or differ by at most one
  // layer (chunk_layers, check_plan_shape): `longer` of them hold one more.
  const int chunks = p.model_chunks();
  const int base = stage_layers / chunks, longer = stage_layers % chunks;
  return longer * std::min(p.recompute_num_layers, base + 1) + (chunks - longer) * std::min(p.recompute_num_layers, base);
}

int recomputed_layers_total(const Plan& p, int layers) {
  if (p.recompute != Recompute::full || p.recompute_num_layers <= 0) return layers;
  int n = 0;
  for (int s = 0; s < p.pp; ++s) n += recomputed_layers(p, stage_layer_count(p, layers, s));
  return n;
}

double recomputed_layer_fraction(const Plan& p, int stage_layers) {
  if (stage_layers <= 0) return 0.0;
  return static_cast<double>(recomputed_layers(p, stage_layers)) / stage_layers;
}

std::vector<int> virtual_stage_bounds(const std::vector<int>& stated, int layers, int pp, int chunks,
                                      const std::vector<int>& stated_chunks) {
  std::vector<int> bounds{0};
  bounds.reserve(static_cast<std::size_t>(pp) * chunks + 1);
  if (!stated_chunks.empty()) {
    assert(stated_chunks.size() == static_cast<std::size_t>(pp) * static_cast<std::size_t>(chunks));
    for (int n : stated_chunks) bounds.push_back(bounds.back() + n);
    assert(bounds.back() == layers);
    return bounds;
  }
  for (int c = 0; c < chunks; ++c)
    for (int r = 0; r < pp; ++r)
      bounds.push_back(bounds.back() + partition_layer_count(stated, layers, pp, r) / chunks);
  assert(bounds.back() == layers);
  return bounds;
}

int max_stage_layers(const Plan& p, int layers) {
  if (p.stage_layers.empty()) return layers / p.pp + (layers % p.pp != 0 ? 1 : 0);
  return *std::max_element(p.stage_layers.begin(), p.stage_layers.end());
}

int max_middle_stage_layers(const Plan& p, int layers) {
  if (p.pp < 3) return 0;
  // Balanced stages never grow along the pipeline: stage 1 is the largest middle one.
  if (p.stage_layers.empty()) return stage_layer_count(p, layers, 1);
  return *std::max_element(p.stage_layers.begin() + 1, p.stage_layers.end() - 1);
}

bool even_stages(const Plan& p, int layers) {
  if (layers % p.pp != 0) return false;
  return std::all_of(p.stage_layers.begin(), p.stage_layers.end(), [&](int n) { return n == layers / p.pp; });
}

std::vector<int> megatron_stage_layers(int layers, int pp) {
  if (pp < 2 || pp > layers || layers % pp == 0) return {};
  if (pp == 2) return {layers - layers / 2, layers / 2};
  // Middle stages of m layers leave r = layers − (pp − 2)·m to the two ends,
  // each of which needs one: try m = ⌈L/pp⌉ (the ends then hold at most m)
  // and m = ⌊L/pp⌋ (needed when the ends would be left fewer than 2 layers).
  std::vector<int> best;
  int best_max = layers + 1;
  for (const int m : {layers / pp + 1, layers / pp}) {
    if (m < 1) continue;
    const int r = layers - (pp - 2) * m;
    if (r < 2) continue;
    const int first = r - r / 2, last = r / 2;
    const int largest = std::max(m, first);
    if (largest < best_max) {
      best_max = largest;
      best.assign(static_cast<std::size_t>(pp), m);
      best.front() = first;
      best.back() = last;
    }
  }
  return best;
}

namespace {
// The flags that counted the embedding and/or the loss, for their errors.
std::string accounting_flags(bool embedding, bool loss) {
  return std::string(embedding ? "--account-for-embedding-in-pipeline-split" : "") + (embedding && loss ? " and " : "") +
         (loss ? "--account-for-loss-in-pipeline-split" : "");
}
}  // namespace

std::vector<int> stage_layers_accounting(int layers, int pp, bool embedding, bool loss) {
  const int counted = layers + (embedding ? 1 : 0) + (loss ? 1 : 0);
  const std::string flags = accounting_flags(embedding, loss);
  auto s = [](auto v) { return std::to_string(v); };
  if (pp < 2) throw InputError(flags + ": need --pp >= 2, got " + s(pp));
  const std::string sum = s(layers) + " layers + " + s(counted - layers) + " counted as layers = " + s(counted);
  if (counted % pp != 0)
    throw InputError(flags + ": " + sum + " do not split into " + s(pp) + " equal stages; expected pp dividing " +
                     s(counted));
  // A stage of one counted layer would hold the embedding (or the loss) and
  // no transformer layer.
  if (counted / pp < 2)
    throw InputError(flags + ": " + sum + " split into " + s(pp) + " stages of one counted layer, leaving an end stage "
                     "no transformer layer; expected pp dividing " + s(counted) + " into stages of at least 2");
  std::vector<int> out(static_cast<std::size_t>(pp), counted / pp);
  if (embedding) out.front() -= 1;
  if (loss) out.back() -= 1;
  return out;
}

std::vector<int> chunk_layers_accounting(int layers, int pp, int chunks, bool embedding, bool loss) {
  const std::int64_t counted = std::int64_t{layers} + (embedding ? 1 : 0) + (loss ? 1 : 0);
  const std::int64_t parts = std::int64_t{pp} * chunks;
  const std::string flags = accounting_flags(embedding, loss);
  if (pp < 2 || chunks < 2)
    throw InputError(flags + " with --virtual-stages " + std::to_string(chunks) + ": a virtual pipeline of " +
                     std::to_string(pp) + " stage" + (pp == 1 ? "" : "s") + "; expected --pp >= 2 (and --virtual-stages >= 2)");
  // Megatron-Core asserts the same (its layers per virtual chunk are an
  // integer division of the counted layers).
  if (counted % parts != 0)
    throw InputError(flags + " with --virtual-stages " + std::to_string(chunks) + ": " + std::to_string(layers) +
                     " layers + " + std::to_string(counted - layers) + " counted as layers = " +
                     std::to_string(counted) + " do not split into pp × virtual stages = " + std::to_string(parts) +
                     " equal model chunks; expected pp × --virtual-stages dividing " + std::to_string(counted));
  std::vector<int> out(static_cast<std::size_t>(parts), static_cast<int>(counted / parts));
  if (embedding) out.front() -= 1;
  if (loss) out.back() -= 1;
  return out;
}

std::vector<int> stage_sums_of_chunks(const std::vector<int>& chunk_layers, int pp) {
  std::vector<int> out(static_cast<std::size_t>(pp), 0);
  for (std::size_t i = 0; i < chunk_layers.size(); ++i) out[i % static_cast<std::size_t>(pp)] += chunk_layers[i];
  return out;
}

std::vector<int> stage_layers_from_ends(int layers, int pp, int first, int last) {
  auto s = [](auto v) { return std::to_string(v); };
  if (pp < 2) throw InputError("--first-stage-layers/--last-stage-layers: need --pp >= 2, got " + s(pp));
  const int ends = (first > 0) + (last > 0);
  const int rest_stages = pp - ends;
  const int rest = layers - first - last;
  if (rest_stages == 0 ? rest != 0 : rest < rest_stages) {
    // Name the flags given, and what is left plainly: "take 33 of the 32 layers".
    const std::string given = first > 0 && last > 0 ? "--first-stage-layers " + s(first) + ", --last-stage-layers " + s(last)
                              : first > 0            ? "--first-stage-layers " + s(first)
                                                     : "--last-stage-layers " + s(last);
    const std::string left = rest < 0 ? "take " + s(first + last) + " of the model's " + s(layers) + " layers"
                                      : "leave " + s(rest) + " of the model's " + s(layers) + " layers for the other " +
                                            s(rest_stages) + (rest_stages == 1 ? " stage" : " stages");
    throw InputError(given + ": " + left + "; expected " +
                     (rest_stages == 0   ? std::string("first + last = ") + s(layers)
                      : rest_stages == 1 ? std::string("at least one layer for the other stage")
                                         : "at least one layer for each of the other " + s(rest_stages) + " stages"));
  }
  std::vector<int> out;
  out.reserve(static_cast<std::size_t>(pp));
  if (first > 0) out.push_back(first);
  for (int i = 0; i < rest_stages; ++i) out.push_back(rest / rest_stages + (i < rest % rest_stages ? 1 : 0));
  if (last > 0) out.push_back(last);
  return out;
}

namespace {

constexpr std::int64_t kMaxDegree = kMaxPlanDegree;
constexpr double kMaxElems = 1e15;  // communication bucket and threshold sizes, in elements

}  // namespace

Plan plan_from_json(const nlohmann::json& doc, const std::string& file) {
  ObjectReader r(doc, file, "$");
  r.schema("ztune.plan/1");
  Plan p;
  p.dp = static_cast<int>(r.integer("dp", 1, kMaxDegree));
  p.tp = static_cast<int>(r.integer("tp", 1, kMaxDegree));
  p.pp = static_cast<int>(r.integer("pp", 1, kMaxDegree));
  // Added with context parallelism (issue 19): absent means 1.
  if (r.has("cp")) p.cp = static_cast<int>(r.integer("cp", 1, kMaxDegree));
  // Added with DeepSpeed-Ulysses (issue 19): absent means 1.
  if (r.has("ulysses")) p.ulysses = static_cast<int>(r.integer("ulysses", 1, kMaxDegree));
  // Added with hybrid sharding (issue 19 item 4): absent means all of dp × cp.
  if (r.has("dp_shard")) p.dp_shard = static_cast<int>(r.integer("dp_shard", 2, kMaxDegree));
  p.virtual_stages = static_cast<int>(r.integer("virtual_stages", 1, kMaxVirtualStages));
  p.sequence_parallel = r.boolean("sequence_parallel");
  p.zero_stage = static_cast<int>(r.integer("zero_stage", 0, 3));
  {
    auto o = r.object("offload");
    p.offload_optimizer = *offload_target_of(o.choice("optimizer", kOffloadTargetNames));
    p.offload_params = *offload_target_of(o.choice("params", kOffloadTargetNames));
    o.finish();
  }
  p.micro_batch = static_cast<int>(r.integer("micro_batch", 1, kMaxMicroBatch));
  p.grad_accum = static_cast<int>(r.integer("grad_accum", 1, kMaxGradAccum));
  p.global_batch = r.integer("global_batch", 1, kMaxGlobalBatch);
  p.recompute = *recompute_of(r.choice("recompute", kRecomputeNames));
  p.precision = *precision_of(r.choice("precision", kPrecisionNames));
  p.schedule = *schedule_of(r.choice("schedule", kScheduleNames));
  {
    auto c = r.object("communication");
    p.overlap_comm = c.boolean("overlap_comm");
    // Element counts, exported to DeepSpeed as integers: at least one element
    // (0 for the threshold) and at most 1e15, so that they convert exactly.
    p.reduce_bucket_elems = c.number("reduce_bucket_elems", 1, kMaxElems);
    p.allgather_bucket_elems = c.number("allgather_bucket_elems", 1, kMaxElems);
    p.prefetch_bucket_elems = c.number("prefetch_bucket_elems", 1, kMaxElems);
    p.max_live_params = c.number("max_live_params", 1, kMaxElems);
    // Added with DeepSpeed's recomputation gathers: absent means its default.
    if (c.has("max_reuse_distance")) p.max_reuse_distance = c.number("max_reuse_distance", 0, kMaxElems);
    p.param_persistence_threshold = c.number("param_persistence_threshold", 0, kMaxElems);
    // Added with tensor-parallel communication overlap: absent means off.
    p.tp_comm_overlap = c.optional_boolean("tp_comm_overlap").value_or(false);
    // Added with DeepSpeed's reduce_scatter switch: absent means reduce-scatter.
    p.reduce_scatter = c.optional_boolean("reduce_scatter").value_or(true);
    // Added with the stated reduction dtype: absent means the engine's.
    if (c.has("grad_reduce_dtype"))
      p.grad_reduce_dtype = precision_of(c.choice("grad_reduce_dtype", kPrecisionNames));
    c.finish();
  }
  {
    auto o = r.object("onebit_adam");
    p.onebit_adam = o.boolean("enabled");
    p.onebit_freeze_step = static_cast<int>(o.integer("freeze_step", 0, kMaxFreezeStep));
    o.finish();
  }
  {
    auto s = r.object("sparse_attention");
    p.sparse_attention = *sparse_layout_of(s.choice("layout", kSparseLayoutNames));
    p.sparse_block = static_cast<int>(s.integer("block", 16, 128));
    s.finish();
  }
  p.zeropp = r.boolean("zeropp");
  // Added after the first plan files were written: absent means standard.
  p.attention = *attention_kernel_of(r.optional_choice("attention", kAttentionKernelNames, "standard"));
  // Added with the unfused bias kernels: absent means Megatron's fused ones.
  p.bias_fusion = r.optional_boolean("bias_fusion").value_or(true);
  // Added with FP8 linear layers: absent means none.
  p.fp8 = *fp8_recipe_of(r.optional_choice("fp8", kFp8RecipeNames, "none"));
  p.fp8_param_gather = r.optional_boolean("fp8_param_gather").value_or(false);
  // Added with ZeRO-R's partitioned activations: absent means not partitioned.
  p.partition_activations = r.optional_boolean("partition_activations").value_or(false);
  // Added with ZeRO-R's CPU checkpointing: absent means checkpoints stay on the GPU.
  p.cpu_checkpointing = r.optional_boolean("cpu_checkpointing").value_or(false);
  // Added with the engines' selective policies: absent means Korthikanti's attention core.
  p.recompute_policy =
      *selective_policy_of(r.optional_choice("recompute_policy", kSelectivePolicyNames, "attention"));
  // Added with torchtitan's every-k-th-layer checkpointing: absent means k = 2.
  if (r.has("recompute_every")) p.recompute_every = static_cast<int>(r.integer("recompute_every", 2, kMaxDegree));
  // Added with Megatron's block recomputation: absent means every layer.
  if (r.has("recompute_num_layers"))
    p.recompute_num_layers = static_cast<int>(r.integer("recompute_num_layers", 1, kMaxDegree));
  // Added with the optimizer's state dtypes: absent means fp32 states.
  if (auto o = r.optional_object("optimizer")) {
    p.master_dtype = *precision_of(o->optional_choice("master_dtype", kPrecisionNames, "fp32"));
    p.moments_dtype = *precision_of(o->optional_choice("moments_dtype", kPrecisionNames, "fp32"));
    p.param_remainders = o->optional_boolean("param_remainders").value_or(false);
    o->finish();
  }
  // Added with uneven pipeline stages (issue 19): absent means balanced.
  if (r.has("stage_layers")) {
    const auto& arr = r.raw("stage_layers");
    const std::string path = r.path_of("stage_layers");
    if (!arr.is_array())
      throw InputError(file + ": " + path + ": expected an array of pp layer counts, got " + describe_json(arr));
    if (arr.size() != static_cast<std::size_t>(p.pp))
      throw InputError(file + ": " + path + ": expected " + std::to_string(p.pp) + " entries (one per stage, pp " +
                       std::to_string(p.pp) + "), got " + std::to_string(arr.size()));
    p.stage_layers.reserve(arr.size());
    for (std::size_t i = 0; i < arr.size(); ++i) {
      const auto& v = arr[i];
      // A whole number, 8 or 8.0, as every integer field of the formats (docs/formats.md).
      const double n = v.is_number() ? v.get<double>() : 0.0;
      if (!v.is_number() || !(n >= 1) || n > kMaxDegree || std::floor(n) != n)
        throw InputError(file + ": " + path + "[" + std::to_string(i) + "]: expected an integer layer count in [1, " +
                         std::to_string(kMaxDegree) + "], got " + describe_json(v));
      p.stage_layers.push_back(static_cast<int>(n));
    }
  }
  // Added with Megatron-Core's interleaved accounting layout: absent means
  // each stage cut into equal chunks.
  if (r.has("chunk_layers")) {
    const auto& arr = r.raw("chunk_layers");
    const std::string path = r.path_of("chunk_layers");
    const std::size_t expected = static_cast<std::size_t>(p.pp) * static_cast<std::size_t>(p.virtual_stages);
    if (!arr.is_array())
      throw InputError(file + ": " + path + ": expected an array of pp × virtual_stages layer counts, got " +
                       describe_json(arr));
    if (p.virtual_stages < 2)
      throw InputError(file + ": " + path + ": model chunks need virtual_stages >= 2 (the interleaved schedule), got " +
                       "virtual_stages " + std::to_string(p.virtual_stages) + "; expected no chunk_layers");
    if (arr.size() != expected)
      throw InputError(file + ": " + path + ": expected " + std::to_string(expected) + " entries (pp " +
                       std::to_string(p.pp) + " × virtual_stages " + std::to_string(p.virtual_stages) +
                       ", in the order the pipeline runs them), got " + std::to_string(arr.size()));
    p.chunk_layers.reserve(arr.size());
    for (std::size_t i = 0; i < arr.size(); ++i) {
      const auto& v = arr[i];
      const double n = v.is_number() ? v.get<double>() : -1.0;
      if (!v.is_number() || !(n >= 0) || n > kMaxDegree || std::floor(n) != n)
        throw InputError(file + ": " + path + "[" + std::to_string(i) + "]: expected an integer layer count in [0, " +
                         std::to_string(kMaxDegree) + "], got " + describe_json(v));
      p.chunk_layers.push_back(static_cast<int>(n));
    }
    // The stages follow from the chunks; stated too, they must agree
    // (check_plan_shape).
    if (p.stage_layers.empty()) p.stage_layers = stage_sums_of_chunks(p.chunk_layers, p.pp);
  }
  r.finish();
  // Each degree is at most 2^20; their product must still count devices in an int.
  if (p.devices() > std::numeric_limits<int>::max())
    throw r.error("dp", "expected dp×tp×cp×pp of at most " + std::to_string(std::numeric_limits<int>::max()) +
                            " devices, got " +
                            (p.devices() >= kPlanDevicesSaturated ? std::string("more than 2^62")
                                                                  : std::to_string(p.devices())));
  if (p.sequences_per_step() != p.global_batch)
    throw r.error("global_batch", "expected micro_batch × grad_accum × dp = " +
                                      std::to_string(p.sequences_per_step()) +
                                      ", got " + std::to_string(p.global_batch));
  return p;
}

nlohmann::json plan_to_json(const Plan& p) {
  nlohmann::json j{
      {"schema", "ztune.plan/1"},
      {"dp", p.dp},
      {"tp", p.tp},
      {"pp", p.pp},
      {"virtual_stages", p.virtual_stages},
      {"sequence_parallel", p.sequence_parallel},
      {"zero_stage", p.zero_stage},
      {"offload", {{"optimizer", to_string(p.offload_optimizer)}, {"params", to_string(p.offload_params)}}},
      {"micro_batch", p.micro_batch},
      {"grad_accum", p.grad_accum},
      {"global_batch", p.global_batch},
      {"recompute", to_string(p.recompute)},
      {"precision", to_string(p.precision)},
      {"schedule", to_string(p.schedule)},
      {"communication",
       {{"overlap_comm", p.overlap_comm},
        {"reduce_bucket_elems", p.reduce_bucket_elems},
        {"allgather_bucket_elems", p.allgather_bucket_elems},
        {"prefetch_bucket_elems", p.prefetch_bucket_elems},
        {"max_live_params", p.max_live_params},
        {"param_persistence_threshold", p.param_persistence_threshold}}},
      {"onebit_adam", {{"enabled", p.onebit_adam}, {"freeze_step", p.onebit_freeze_step}}},
      {"sparse_attention", {{"layout", to_string(p.sparse_attention)}, {"block", p.sparse_block}}},
      {"zeropp", p.zeropp},
      {"attention", to_string(p.attention)}};
  // Written only when stated: a balanced plan's file (and digest) is unchanged.
  if (!p.stage_layers.empty()) j["stage_layers"] = p.stage_layers;
  if (!p.chunk_layers.empty()) j["chunk_layers"] = p.chunk_layers;
  if (p.partition_activations) j["partition_activations"] = true;
  if (!p.bias_fusion) j["bias_fusion"] = false;
  if (p.fp8 != Fp8Recipe::none) j["fp8"] = to_string(p.fp8);
  if (p.fp8_param_gather) j["fp8_param_gather"] = true;
  if (p.cpu_checkpointing) j["cpu_checkpointing"] = true;
  if (p.recompute_policy != SelectivePolicy::attention) j["recompute_policy"] = to_string(p.recompute_policy);
  if (p.recompute_num_layers > 0) j["recompute_num_layers"] = p.recompute_num_layers;
  if (p.recompute_every != 2) j["recompute_every"] = p.recompute_every;
  if (p.cp > 1) j["cp"] = p.cp;  // likewise: a plan without context parallelism is unchanged
  if (p.ulysses > 1) j["ulysses"] = p.ulysses;  // and one without Ulysses
  if (p.dp_shard > 0) j["dp_shard"] = p.dp_shard;  // and one without hybrid sharding
  if (p.tp_comm_overlap) j["communication"]["tp_comm_overlap"] = true;  // and one without TP overlap
  if (!p.reduce_scatter) j["communication"]["reduce_scatter"] = false;  // and one that reduce-scatters
  if (p.grad_reduce_dtype) j["communication"]["grad_reduce_dtype"] = to_string(*p.grad_reduce_dtype);  // and the engine's
  if (p.low_precision_optimizer()) {  // and one with fp32 optimizer states
    j["optimizer"] = {{"master_dtype", to_string(p.master_dtype)}, {"moments_dtype", to_string(p.moments_dtype)}};
    if (p.param_remainders) j["optimizer"]["param_remainders"] = true;
  }
  if (p.max_reuse_distance != Plan{}.max_reuse_distance)
    j["communication"]["max_reuse_distance"] = p.max_reuse_distance;  // and one at DeepSpeed's default
  return j;
}

PlanFile plan_file_from_json(const nlohmann::json& doc, const std::string& file) {
  ObjectReader r(doc, file, "$");
  // A plan on its own (plan_to_json's document) is the plan file's "plan" member.
  if (doc.is_object() && doc.value("schema", nlohmann::json()) == "ztune.plan/1")
    throw r.error("schema", "expected \"ztune.planfile/1\", got \"ztune.plan/1\": this is a plan on its own; a plan "
                            "file holds it as {\"schema\": \"ztune.planfile/1\", \"plan\": {...}} beside its model and "
                            "cluster (ztune search --out writes one)");
  r.schema("ztune.planfile/1");
  PlanFile pf;
  {
    const auto& plan = r.raw("plan");
    ObjectReader check(plan, file, "$.plan");  // type check with the right path
    (void)check;
    try {
      pf.plan = plan_from_json(plan, file);
    } catch (const InputError& e) {
      // Re-anchor "$." paths of the nested document under "$.plan".
      std::string msg = e.what();
      auto pos = msg.find(": $");
      if (pos != std::string::npos) msg.replace(pos, 3, ": $.plan");
      throw InputError(msg);
    }
  }
  auto nested = [&](const char* key, auto parse) {
    using T = decltype(parse(std::declval<const nlohmann::json&>()));
    std::optional<T> out;
    if (!r.has(key)) { (void)r.optional_object(key); return out; }
    try {
      out = parse(r.raw(key));
    } catch (const InputError& e) {
      std::string msg = e.what();
      auto pos = msg.find(": $");
      if (pos != std::string::npos) msg.replace(pos, 3, std::string(": $.") + key);
      throw InputError(msg);
    }
    return out;
  };
  pf.model = nested("model", [&](const nlohmann::json& j) { return transformer_from_json(j, file); });
  pf.cluster = nested("cluster", [&](const nlohmann::json& j) { return cluster_from_json(j, file); });
  if (r.has("engine")) pf.engine = r.choice("engine", std::span<const char* const>(kPlanEngineNames));
  pf.compile = r.optional_boolean("compile").value_or(false);
  r.finish();
  if (pf.model && pf.cluster) {
    if (auto why = check_plan(pf.plan, *pf.model, *pf.cluster)) {
      std::string msg = *why;
      if (msg.starts_with("$")) msg = "$.plan" + msg.substr(1);
      throw InputError(file + ": " + msg);
    }
  }
  return pf;
}

PlanFile load_plan_file(const std::string& path) { return plan_file_from_json(read_json_file(path), path); }

nlohmann::json plan_file_to_json(const PlanFile& pf) {
  nlohmann::json j{{"schema", "ztune.planfile/1"}, {"plan", plan_to_json(pf.plan)}};
  if (pf.model) j["model"] = transformer_to_json(*pf.model);
  if (pf.cluster) j["cluster"] = cluster_to_json(*pf.cluster);
  if (pf.engine) j["engine"] = *pf.engine;
  if (pf.compile) j["compile"] = true;
  return j;
}

std::optional<std::string> check_tensor_split(const Transformer& m, int tp) {
  auto s = [](auto v) { return std::to_string(v); };
  if (m.heads % tp != 0)
    return "$.tp: " + s(tp) + " does not divide the model's " + s(m.heads) + " heads; expected a divisor of " +
           s(m.heads);
  if (m.kv_heads % tp != 0 && tp % m.kv_heads != 0)
    return "$.tp: " + s(tp) + " and the model's " + s(m.kv_heads) +
           " kv heads do not divide one another; expected a divisor or a multiple of " + s(m.kv_heads);
  if (m.ffn_hidden % tp != 0)
    return "$.tp: " + s(tp) + " does not divide ffn_hidden " + s(m.ffn_hidden) + "; expected a divisor of " +
           s(m.ffn_hidden);
  return std::nullopt;
}

std::optional<std::string> fp8_device_refusal(const Cluster& c) {
  if (c.device_kind != DeviceKind::cpu && c.node.gpu.peak_tflops_fp8 > 0) return std::nullopt;
  return (c.device_kind == DeviceKind::cpu ? "a CPU cluster (" + c.name + ")" : c.node.gpu.name) +
         " has no FP8 tensor cores (Ada, Hopper or newer; the cluster file's peak_tflops.fp8)";
}

namespace {

// Plan::chunk_layers against the plan's stages (already checked to sum to the
// model's layers): the family Megatron-Core lays out and every consumer of
// chunk_layers relies on (recomputed_layers, the executor's and simulator's
// empty end chunks).
std::optional<std::string> check_chunk_layers(const Plan& p, const Transformer& m) {
  auto s = [](auto v) { return std::to_string(v); };
  const auto& c = p.chunk_layers;
  const std::size_t pp = static_cast<std::size_t>(p.pp);
  if (p.virtual_stages < 2 || p.schedule != Schedule::interleaved)
    return std::string("$.chunk_layers: model chunks need the interleaved schedule with virtual_stages >= 2; "
                       "expected schedule \"interleaved\" with virtual_stages >= 2, or no stated chunks");
  if (c.size() != pp * static_cast<std::size_t>(p.virtual_stages))
    return "$.chunk_layers: " + s(c.size()) + " entries for pp " + s(p.pp) + " × virtual_stages " +
           s(p.virtual_stages) + "; expected " + s(pp * static_cast<std::size_t>(p.virtual_stages));
  // Checked before the stages, which a plan file may have filled from these.
  std::int64_t total = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (c[i] < 0 || (c[i] < 1 && i > 0 && i + 1 < c.size()))
      return "$.chunk_layers[" + s(i) + "]: " + s(c[i]) + " layers; expected at least 1 (only the first chunk, "
             "beside the embedding, and the last, beside the loss, may be empty)";
    total += c[i];
  }
  if (total != m.layers)
    return "$.chunk_layers: the chunks hold " + s(total) + " layers; expected the model's " + s(m.layers);
  if (p.stage_layers.size() != pp)
    return std::string("$.chunk_layers: stated without stage_layers; expected stage_layers, each stage's chunks' sum");
  for (std::size_t r = 0; r < pp; ++r) {
    // No allocation: the search checks every plan it generates.
    int lo = c[r], hi = c[r], sum = 0;
    for (std::size_t i = r; i < c.size(); i += pp) lo = std::min(lo, c[i]), hi = std::max(hi, c[i]), sum += c[i];
    if (sum != p.stage_layers[r])
      return "$.chunk_layers: stage " + s(r) + "'s chunks hold " + s(sum) + " layers, its stage_layers entry " +
             s(p.stage_layers[r]) + "; expected them equal";
    if (hi - lo > 1)
      return "$.chunk_layers: stage " + s(r) + "'s chunks hold " + s(lo) + " to " + s(hi) +
             " layers; expected a stage's chunks to differ by at most one layer (Megatron-Core's layouts)";
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_plan_shape(const Plan& p, const Transformer& m) {
  auto s = [](auto v) { return std::to_string(v); };
  if (auto why = check_tensor_split(m, p.tp)) return why;
  if (p.pp > m.layers)
    return "$.pp: " + s(p.pp) + " stages for " + s(m.layers) + " layers; expected at most " + s(m.layers);
  // Stated chunks first: a plan file may have filled the stages from them.
  if (!p.chunk_layers.empty())
    if (auto why = check_chunk_layers(p, m)) return why;
  if (!p.stage_layers.empty()) {
    if (p.stage_layers.size() != static_cast<std::size_t>(p.pp))
      return "$.stage_layers: " + s(p.stage_layers.size()) + " entries for pp " + s(p.pp) + "; expected one per stage";
    std::int64_t sum = 0;
    for (std::size_t i = 0; i < p.stage_layers.size(); ++i) {
      if (p.stage_layers[i] < 1)
        return "$.stage_layers[" + s(i) + "]: " + s(p.stage_layers[i]) + " layers; expected at least 1";
      sum += p.stage_layers[i];
    }
    if (sum != m.layers)
      return "$.stage_layers: the stages hold " + s(sum) + " layers; expected the model's " + s(m.layers);
  }
  if (p.cp > 1) {
    // Load-balanced causal chunks (Megatron-Core's context parallelism): the
    // sequence is cut into 2·cp equal chunks, rank i holding i and 2cp−1−i.
    if (m.seq_len % (2 * p.cp) != 0)
      return "$.cp: " + s(p.cp) + " context-parallel ranks cut the sequence into 2·cp = " + s(2 * p.cp) +
             " load-balanced chunks, which do not divide the sequence length " + s(m.seq_len) +
             "; expected 2·cp to divide " + s(m.seq_len);
    if (p.sparse_attention != SparseLayout::none)
      return "$.cp: context parallelism runs dense ring attention; block-sparse attention (" +
             to_string(p.sparse_attention) + ") is not split over cp ranks; expected cp 1 or sparse_attention none";
    if (m.windowed())
      return "$.cp: context parallelism rings the whole causal prefix; the model's sliding window of " +
             s(m.attention_window) + " tokens is not modelled with it; expected cp 1";
    if (p.onebit_adam || p.zeropp)
      return std::string("$.cp: context parallelism with ") + (p.onebit_adam ? "1-bit Adam" : "ZeRO++") +
             " is not modelled (neither Megatron-Core nor torchtitan combines them); expected cp 1";
    if (p.offload_optimizer != OffloadTarget::none || p.offload_params != OffloadTarget::none)
      return "$.cp: context parallelism with offload is not modelled (Megatron-Core and torchtitan keep the states "
             "on the GPUs); expected cp 1 or offload none";
  }
  if (p.ulysses > 1) {
    // DeepSpeed-Ulysses (deepspeed/sequence/layer.py single_all_to_all): the
    // all-to-all scatters whole heads of this rank's tensor-parallel share
    // (floor division, no uneven split in Megatron-DeepSpeed), so ulysses must
    // divide the sequence, the heads per tp rank and the KV heads per tp rank.
    const int kv = m.kv_heads;
    if (p.cp > 1)
      return "$.ulysses: DeepSpeed-Ulysses with context parallelism (cp " + s(p.cp) +
             ") is refused by Megatron-DeepSpeed (\"Megatron-lm CP is not compatible with Deepspeed SP\"); expected "
             "ulysses 1 or cp 1";
    if (p.sequence_parallel)
      return "$.ulysses: DeepSpeed-Ulysses is not compatible with Megatron-LM's sequence parallelism (Megatron-DeepSpeed "
             "refuses both); expected ulysses 1 or sequence_parallel false";
    if (m.seq_len % p.ulysses != 0)
      return "$.ulysses: " + s(p.ulysses) + " Ulysses ranks do not divide the sequence length " + s(m.seq_len) +
             "; expected a divisor of " + s(m.seq_len);
    if (m.heads % (p.tp * p.ulysses) != 0)
      return "$.ulysses: " + s(p.ulysses) + " Ulysses ranks × tp " + s(p.tp) + " do not divide the " + s(m.heads) +
             " attention heads (the all-to-all scatters whole heads); expected tp × ulysses to divide " + s(m.heads);
    // KV heads per tp rank (one, replicated, when tp exceeds them).
    const int kv_local = kv >= p.tp ? kv / p.tp : 1;
    if (kv_local % p.ulysses != 0)
      return "$.ulysses: " + s(p.ulysses) + " Ulysses ranks do not divide the " + s(kv_local) +
             " KV heads of a tp rank (" + s(kv) + " KV heads, tp " + s(p.tp) +
             "; DeepSpeed's all-to-all scatters whole K/V heads and refuses fewer KV heads than ranks); expected "
             "ulysses to divide " + s(kv_local);
    if (p.onebit_adam || p.zeropp)
      return std::string("$.ulysses: DeepSpeed-Ulysses with ") + (p.onebit_adam ? "1-bit Adam" : "ZeRO++") +
             " is not modelled (their compressed exchange is over the dp group, not dp × ulysses); expected ulysses 1";
  }
  // Interleaving cuts every stage into virtual_stages equal chunks
  // (virtual_stage_bounds): balanced stages need pp×v to divide the layers
  // (Megatron-LM's --num-layers-per-virtual-pipeline-stage), stated ones a
  // multiple of v each (Megatron-Core's uneven first and last stages with
  // --num-virtual-stages-per-pipeline-rank).
  // In 64 bits: a plan made in code (not read from a file) is not bounded.
  const std::int64_t chunks = std::int64_t{p.pp} * p.virtual_stages;
  if (p.virtual_stages > 1 && p.stage_layers.empty() && m.layers % chunks != 0)
    return "$.virtual_stages: pp×virtual_stages = " + s(chunks) + " does not divide the model's " +
           s(m.layers) + " layers; interleaving cuts every stage into equal model chunks (expected pp×virtual_stages "
           "to divide " + s(m.layers) + ", or stage_layers stated, each a multiple of virtual_stages)";
  if (p.chunk_layers.empty() && p.virtual_stages > 1 && p.stage_layers.size() == static_cast<std::size_t>(p.pp))
    for (std::size_t i = 0; i < p.stage_layers.size(); ++i)
      if (p.stage_layers[i] % p.virtual_stages != 0)
        return "$.stage_layers[" + s(i) + "]: " + s(p.stage_layers[i]) + " layers do not cut into virtual_stages " +
               s(p.virtual_stages) + " equal model chunks; interleaving cuts every stage into virtual_stages chunks "
               "(expected a multiple of " + s(p.virtual_stages) + ")";
  if (p.sequences_per_step() != p.global_batch)
    return "$.global_batch: expected micro_batch × grad_accum × dp = " +
           s(p.sequences_per_step()) + ", got " + s(p.global_batch);
  if (p.virtual_stages > 1 && p.schedule != Schedule::interleaved)
    return "$.virtual_stages: " + s(p.virtual_stages) + " model chunks need schedule \"interleaved\"";
  if (p.schedule == Schedule::interleaved) {
    if (p.pp < 2) return "$.schedule: interleaved needs pp >= 2";
    if (p.virtual_stages < 2) return "$.schedule: interleaved needs virtual_stages >= 2";
    if (p.grad_accum % p.pp != 0)
      return "$.grad_accum: interleaved 1F1B needs micro-batches (" + s(p.grad_accum) + ") divisible by pp (" +
             s(p.pp) + ")";
  }
  if (p.sequence_parallel && p.tp < 2) return "$.sequence_parallel: needs tp >= 2";
  // Megatron-LM's validate_args: "Tensor parallel communication/GEMM overlap
  // can happen only when sequence parallelism is enabled".
  if (p.tp_comm_overlap && !p.sequence_parallel)
    return "$.communication.tp_comm_overlap: overlaps the sequence-parallel all-gathers and reduce-scatters with "
           "their GEMMs; needs sequence_parallel (and tp >= 2)";
  if (p.partition_activations) {
    if (p.tp < 2) return "$.partition_activations: splits the checkpoints over the tensor-parallel ranks; needs tp >= 2";
    if (p.recompute != Recompute::full)
      return "$.partition_activations: partitions the checkpoints of full recomputation; needs recompute \"full\", got \"" +
             to_string(p.recompute) + "\"";
    if (p.sequence_parallel)
      return "$.partition_activations: sequence parallelism already splits the checkpoints over the tp ranks; use one "
             "or the other";
  }
  if (!p.reduce_scatter && (p.zero_stage < 1 || p.zero_stage > 2))
    return "$.communication.reduce_scatter: chooses how ZeRO-1/2 reduce gradients to their partitions (false: an "
           "all-reduce); zero_stage " + s(p.zero_stage) + " has no such choice (expected reduce_scatter true)";
  // A reduction moves fp32 or the plan's own 16-bit gradients: no engine
  // reduces bf16 gradients in fp16 or the reverse, nor an fp32 model's in 16 bits.
  if (p.grad_reduce_dtype && *p.grad_reduce_dtype != Precision::fp32 && *p.grad_reduce_dtype != p.precision)
    return "$.communication.grad_reduce_dtype: a " + to_string(p.precision) + " plan reduces its gradients in " +
           (p.precision == Precision::fp32 ? std::string("fp32") : "fp32 or " + to_string(p.precision)) +
           " (expected one of those), got \"" + to_string(*p.grad_reduce_dtype) + "\"";
  // FP8 casts scale the 16-bit activations and weights of an autocast region
  // and write 16-bit outputs (Transformer Engine's fp8_autocast under
  // Megatron's --bf16/--fp16; torchao's Float8Linear from bf16).
  if (p.fp8 != Fp8Recipe::none && p.precision == Precision::fp32)
    return "$.fp8: FP8 linear layers cast the plan's 16-bit activations and weights; needs precision \"bf16\" or "
           "\"fp16\", got \"fp32\"";
  if (p.fp8_param_gather && p.fp8 == Fp8Recipe::none)
    return "$.fp8_param_gather: keeps the linear layers' weights in FP8; needs fp8 \"delayed\" or \"tensorwise\", "
           "got \"none\"";
  // A remainder completes an fp32 master from its bf16 weight, which FP8
  // parameters no longer keep.
  if (p.fp8_param_gather && p.param_remainders)
    return "$.fp8_param_gather: FP8 weights leave no bf16 weight for optimizer.param_remainders to complete into "
           "an fp32 master; expected param_remainders false with fp8_param_gather";
  // FP8 GEMMs take operands whose dimensions are multiples of 16
  // (Transformer Engine's assert_dim_for_fp8_exec; torchao and torchtitan
  // skip such linears): each weight's shape on one tensor-parallel rank.
  if (p.fp8 != Fp8Recipe::none) {
    const long h = m.hidden, t = p.tp, kvd = static_cast<long>(m.kv_heads) * m.head_dim();
    const long f_in = (m.activation == Activation::swiglu ? 2L : 1L) * m.ffn_hidden;
    const struct { const char* name; long k, n; } weights[] = {
        {"QKV", h, (h + 2 * kvd) / t}, {"attention projection", h / t, h}, {"FC1", h, f_in / t},
        {"FC2", m.ffn_hidden / t, h}};
    for (const auto& w : weights)
      if (w.k % 16 != 0 || w.n % 16 != 0)
        return "$.fp8: FP8 GEMMs need dimensions that are multiples of 16 (Transformer Engine asserts it, torchao "
               "skips such layers); the " + std::string(w.name) + " weight is " + s(w.k) + " × " + s(w.n) +
               " on each of tp " + s(p.tp) + " ranks: expected fp8 \"none\", or a tp that keeps them multiples of 16";
  }
  // An fp32 plan's parameters are their own master copy. A 16-bit plan's
  // master may be 16-bit of either kind: Apex DistributedFusedAdam's dtype
  // bf16 beside bf16 parameters, or Megatron-Core's --main-params-dtype fp16
  // beside --bf16 (TE FusedAdam scales the fp16 master).
  if (p.master_dtype != Precision::fp32 && p.precision == Precision::fp32)
    return "$.optimizer.master_dtype: an fp32 plan's parameters are the optimizer's master copy (expected \"fp32\"), "
           "got \"" + to_string(p.master_dtype) + "\"";
  // The remainder completes a bf16 parameter to its fp32 master.
  if (p.param_remainders && (p.precision != Precision::bf16 || p.master_dtype != Precision::fp32))
    return "$.optimizer.param_remainders: keeps an fp32 master as the 16 bits its bf16 parameter lacks; needs "
           "precision \"bf16\" and master_dtype \"fp32\", got \"" + to_string(p.precision) + "\" and \"" +
           to_string(p.master_dtype) + "\"";
  if (p.low_precision_optimizer() && p.offload_optimizer != OffloadTarget::none)
    return "$.optimizer: 16-bit optimizer states with optimizer offload are not modelled (DeepSpeed's CPU Adam and "
           "Megatron-Core's --optimizer-cpu-offload keep fp32 states on the host); expected master_dtype and "
           "moments_dtype \"fp32\", or offload.optimizer \"none\"";
  if (p.low_precision_optimizer() && p.onebit_adam)
    return "$.optimizer: 1-bit Adam compresses an fp32 momentum (DeepSpeed OnebitAdam keeps fp32 states); expected "
           "master_dtype and moments_dtype \"fp32\" (and no param_remainders) with onebit_adam";
  if (p.recompute_policy != SelectivePolicy::attention && p.recompute != Recompute::selective)
    return "$.recompute_policy: \"" + to_string(p.recompute_policy) +
           "\" says what selective recomputation recomputes; needs recompute \"selective\", got \"" +
           to_string(p.recompute) + "\"";
  if (p.cpu_checkpointing && p.recompute != Recompute::full)
    return "$.cpu_checkpointing: offloads the checkpoints of full recomputation to the host; needs recompute \"full\", "
           "got \"" + to_string(p.recompute) + "\"";
  if (p.recompute_every != 2 &&
      (p.recompute != Recompute::selective || p.recompute_policy != SelectivePolicy::alternate_layers))
    return "$.recompute_every: every " + s(p.recompute_every) + ordinal_suffix(p.recompute_every) +
           " layer recomputed whole is torchtitan's layer-level checkpointing; needs recompute \"selective\" "
           "with recompute_policy \"alternate_layers\", got \"" + recompute_text(p) + "\"";
  // torchtitan counts the blocks each rank wraps: with more than a stage holds
  // no layer is recomputed, where the priced share is 1/k of every layer.
  if (p.recompute == Recompute::selective && p.recompute_policy == SelectivePolicy::alternate_layers &&
      p.recompute_every > max_stage_layers(p, m.layers))
    return "$.recompute_every: one layer in every " + s(p.recompute_every) + ", in stages of at most " +
           s(max_stage_layers(p, m.layers)) + " layers, recomputes none; expected at most " +
           s(max_stage_layers(p, m.layers)) + ", or recompute \"none\"";
  if (p.recompute_num_layers > 0) {
    if (p.recompute != Recompute::full)
      return "$.recompute_num_layers: " + s(p.recompute_num_layers) +
             " layers of each model chunk recomputed whole is Megatron's block method of full recomputation; needs "
             "recompute \"full\", got \"" + to_string(p.recompute) + "\"";
    // A stage's chunks differ by at most one layer, or are stated (chunk_layers).
    const int per_stage = p.model_chunks();
    const int largest = !p.chunk_layers.empty() ? *std::max_element(p.chunk_layers.begin(), p.chunk_layers.end())
                                                : (max_stage_layers(p, m.layers) + per_stage - 1) / per_stage;
    if (p.recompute_num_layers > largest)
      return "$.recompute_num_layers: " + s(p.recompute_num_layers) + " layers of each model chunk, whose largest holds " +
             s(largest) + "; expected at most " + s(largest) + " (" + s(largest) +
             " recomputes every layer, as recompute \"full\" without recompute_num_layers does)";
    if (p.cpu_checkpointing)
      return "$.recompute_num_layers: block recomputation keeps the other layers' activations on the GPU beside "
             "DeepSpeed's CPU checkpointing, a combination no engine runs; expected cpu_checkpointing false or "
             "recompute_num_layers omitted";
  }
  if (p.offload_params != OffloadTarget::none && p.zero_stage != 3)
    return "$.offload.params: parameter offload needs zero_stage 3 (DeepSpeed ZeRO-Infinity), got stage " +
           s(p.zero_stage);
  if (p.offload_optimizer == OffloadTarget::nvme && p.zero_stage != 3)
    return "$.offload.optimizer: NVMe optimizer offload needs zero_stage 3, got stage " + s(p.zero_stage);
  if (p.offload_optimizer == OffloadTarget::cpu && p.zero_stage == 0)
    return "$.offload.optimizer: optimizer offload needs zero_stage >= 1 (the partitioned optimizer)";
  // ZeRO-3 under a pipeline keeps each stage's gathered parameters and whole
  // gradients through the step (Plan::zero3_held_through_step, FSDP2 under
  // torch.distributed.pipelining); stage 2 has no such form in any engine.
  if (p.pp > 1 && p.zero_stage == 2)
    return "$.zero_stage: stage 2 partitions gradients per micro-batch, which pipeline parallelism (pp " + s(p.pp) +
           ") does not support; use stage 0 or 1, or 3 (FSDP under a pipeline: gathered once per step)";
  if (p.pp > 1 && p.zero_stage == 3 && p.dp_cp() == 1)
    return "$.zero_stage: 3 under a pipeline with no data-parallel group (dp × cp × ulysses 1) shards nothing and "
           "keeps a gathered copy of the stage and its gradients beside the parameters: expected zero_stage 0 or "
           "1, or dp > 1";
  if (p.pp > 1 && p.zeropp)
    return "$.zeropp: ZeRO++ is DeepSpeed's, whose pipeline engine takes ZeRO stage 0 or 1 (pp " + s(p.pp) +
           "); expected pp 1";
  if (p.pp > 1 && (p.offload_optimizer != OffloadTarget::none || p.offload_params != OffloadTarget::none))
    return "$.offload: offload is not supported with pipeline parallelism";
  if (p.onebit_adam && p.zero_stage != 0) return "$.onebit_adam: 1-bit Adam needs zero_stage 0";
  if (p.zeropp && p.zero_stage != 3) return "$.zeropp: ZeRO++ needs zero_stage 3";
  if (p.dp_shard > 0) {
    // Hybrid sharding: ZeRO-3 inside groups of dp_shard, replicated across them.
    const int n = p.dp_cp();
    // The weights' data-parallel group: dp, and the ranks cp and Ulysses split a sequence over.
    const std::string group = p.cp > 1 || p.ulysses > 1
                                  ? std::string("dp") + (p.cp > 1 ? " × cp" : "") + (p.ulysses > 1 ? " × ulysses" : "") +
                                        " = " + s(n)
                                  : "dp " + s(n);
    if (p.zero_stage != 3)
      return "$.dp_shard: hybrid sharding shards parameters, gradients and optimizer states (FSDP HYBRID_SHARD, "
             "DeepSpeed MiCS: ZeRO-3) inside groups of dp_shard ranks; needs zero_stage 3, got stage " +
             s(p.zero_stage);
    if (n < 4)
      return "$.dp_shard: " + s(p.dp_shard) + " ranks per shard group with " + group +
             ": hybrid sharding needs at least two groups of two ranks (dp × cp of 4 or more); expected dp_shard "
             "omitted (ZeRO-3 over all " + s(n) + " ranks)";
    if (p.dp_shard >= n || n % p.dp_shard != 0 || p.dp_shard < 2)
      return "$.dp_shard: " + s(p.dp_shard) + " ranks per shard group with " + group +
             "; expected a divisor of " + s(n) + " from 2 to " + s(n / 2) +
             " (omit dp_shard to shard over all " + s(n) + " ranks)";
    if (p.zeropp)
      return "$.dp_shard: ZeRO++ (hpZ) keeps its own node-local secondary copy beside a partition over all of dp; "
             "hybrid sharding with ZeRO++ is not modelled; expected dp_shard omitted or zeropp false";
    if (p.onebit_adam) return "$.dp_shard: 1-bit Adam needs zero_stage 0; expected dp_shard omitted";
  }
  if (p.sparse_attention != SparseLayout::none && m.seq_len % p.sparse_block != 0)
    return "$.sparse_attention.block: " + s(p.sparse_block) + " does not divide the sequence length " + s(m.seq_len);
  if (m.windowed() && p.sparse_attention != SparseLayout::none)
    return "$.sparse_attention.layout: the model attends a sliding window of " + s(m.attention_window) +
           " tokens; a block-sparse layout would replace it (use one or the other)";
  if (p.attention == AttentionKernel::eager && p.sparse_attention != SparseLayout::none)
    return "$.attention: eager is the dense softmax chain as separate kernels; block-sparse attention (" +
           to_string(p.sparse_attention) + ") has its own kernels; expected attention \"standard\"";
  if (p.attention == AttentionKernel::eager && p.cp > 1)
    return "$.attention: eager attention with context parallelism is not modelled (Megatron-Core and torchtitan "
           "ring fused kernels only); expected cp 1 or attention \"cudnn\" or \"flash\"";
  if (fused_attention(p.attention) && p.sparse_attention != SparseLayout::none)
    return "$.attention: " + to_string(p.attention) + " is a dense attention kernel; block-sparse attention (" + to_string(p.sparse_attention) +
           ") has its own kernels; expected \"standard\"";
  return std::nullopt;
}

std::optional<std::string> check_plan(const Plan& p, const Transformer& m, const Cluster& c) {
  auto s = [](auto v) { return std::to_string(v); };
  if (p.devices() > c.total_devices())
    return std::string(p.ulysses > 1 ? "$.dp: dp×tp×ulysses×pp = " : p.cp > 1 ? "$.dp: dp×tp×cp×pp = " : "$.dp: dp×tp×pp = ") +
           (p.devices() >= kPlanDevicesSaturated ? std::string("more than 2^62") : s(p.devices())) +
           " needs more devices than the cluster's " + s(c.total_devices()) +
           " (" + s(c.nodes) + (c.nodes == 1 ? " node × " : " nodes × ") + s(c.node.gpus) + "); expected at most " +
           s(c.total_devices()) +
           " (fewer is allowed: the rest stay idle)";
  // Said before the plan's own rules: a device without FP8 units is the
  // cause to name, not the precision the plan defaulted to there.
  if (p.fp8 != Fp8Recipe::none)
    if (auto why = fp8_device_refusal(c)) return "$.fp8: " + *why + "; expected fp8 \"none\"";
  if (auto why = check_plan_shape(p, m)) return why;
  if ((p.offload_optimizer == OffloadTarget::nvme || p.offload_params == OffloadTarget::nvme) &&
      c.node.nvme_size_tb == 0)
    return "$.offload: NVMe offload on a cluster without NVMe (" + c.name + ")";
  if (p.precision == Precision::bf16 && c.node.gpu.peak_tflops_bf16 == 0 && c.device_kind == DeviceKind::gpu)
    return "$.precision: " + c.node.gpu.name + " has no bf16 support; use fp16";
  if (p.precision == Precision::fp16 && c.node.gpu.peak_tflops_fp16 == 0 && c.device_kind == DeviceKind::gpu)
    return "$.precision: " + c.node.gpu.name + " has no fp16 support";
  if (p.tp_comm_overlap && !supports_transformer_engine(c))
    return "$.communication.tp_comm_overlap: Transformer Engine's userbuffers overlap runs on Ampere or newer GPUs; " +
           (c.device_kind == DeviceKind::cpu ? std::string("a CPU cluster") : c.node.gpu.name) +
           " has no Transformer Engine (expected tp_comm_overlap false)";
  if (p.cpu_checkpointing && c.device_kind == DeviceKind::cpu)
    return "$.cpu_checkpointing: offloads activation checkpoints from GPU memory to the host; on a CPU cluster (" +
           c.name + ") they are in host memory already (expected cpu_checkpointing false)";
  if (fused_attention(p.attention) && !supports_flash_attention(c))
    return std::string("$.attention: ") +
           (p.attention == AttentionKernel::cudnn ? "cuDNN's fused flash attention" : "FlashAttention-2") +
           " needs an Ampere or newer GPU (bf16 tensor cores); " + c.node.gpu.name + " has none; expected \"standard\"";
  return std::nullopt;
}

std::string in_plan_file(std::string_view why) {
  if (why.starts_with("$.")) return "$.plan." + std::string(why.substr(2));
  return std::string(why);
}

}  // namespace ztune
