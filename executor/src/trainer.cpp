#include "ztune/executor/trainer.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string>

#include "ztune/executor/checkpoint.hpp"
#include "ztune/executor/init.hpp"
#include "ztune/vocab/pipeline_schedule.hpp"
#include "ztune/executor/ring_attention.hpp"

namespace ztune::executor {
namespace {
constexpr int kTagActivation = 1;
constexpr int kTagGradient = 2;
constexpr int kTagCollect = 3;
// Point-to-point messages go to the receiving chunk's tag, so the two
// directions between a pair of stages and the chunks never mix (with two
// stages the wrap-around link joins the same pair of ranks).
int pipe_tag(int base, int receiving_chunk) { return base + 8 * receiving_chunk; }
}  // namespace

Trainer::Trainer(const Transformer& m, const Plan& plan, const TrainOptions& opt, Communicator& world,
                 Backend& backend, const TokenSource& data)
    : m_(m), plan_(plan), opt_(opt), be_(backend), data_(data),
      groups_(make_process_groups(world,
                                  {plan.dp, plan.tp, plan.pp, plan.model_chunks(), opt.ranks_per_node,
                                   plan.stage_layers, plan.cp, plan.ulysses, plan.dp_shard, plan.chunk_layers},
                                  m.tied_embeddings)),
      host_pool_(opt.threads) {
  StoreOptions so;
  so.zero_stage = plan.zero_stage;
  so.offload_optimizer = plan.offload_optimizer != OffloadTarget::none;
  so.offload_params = plan.offload_params != OffloadTarget::none;
  so.overlap_comm = plan.overlap_comm;
  so.sequence_parallel = plan.sequence_parallel && plan.tp > 1;
  so.bucket_elems = plan.reduce_bucket_elems;
  so.persistence_threshold = plan.param_persistence_threshold;
  so.onebit_freeze_step = plan.onebit_adam ? plan.onebit_freeze_step : -1;
  so.zeropp = plan.zeropp;
  so.hold_gathered = plan.zero3_held_through_step();
  // Mixed precision is storage (issue 24): the plan's 16-bit type for the
  // parameters and activations, fp32 masters; gradients in the type the plan
  // reduces them in (its own precision unless it states fp32).
  if (!opt.fp32_storage) {
    so.storage = storage_of(plan.precision);
    so.grad_storage = storage_of(plan.grad_reduce_dtype.value_or(plan.precision));
  }
  // The states' own dtypes (16-bit with NeMo's optim.dtype bf16 or Megatron-Core's precision-aware optimizer).
  so.optimizer_states = {storage_of(plan.master_dtype), storage_of(plan.moments_dtype)};
  // ZeRO-Infinity's files, one per rank and kind, in --nvme-dir (removed when the run ends).
  auto nvme_file = [&](const std::string& what) {
    const std::filesystem::path dir = opt.nvme_dir.empty() ? std::filesystem::temp_directory_path()
                                                           : std::filesystem::path(opt.nvme_dir);
    return (dir / ("ztune-" + what + ".world" + std::to_string(world.size()) + ".rank" +
                   std::to_string(world.rank()) + "." + std::to_string(::getpid()) + ".swp"))
        .string();
  };
  if (plan.offload_optimizer == OffloadTarget::nvme) so.nvme_file = nvme_file("optimizer");
  if (plan.offload_params == OffloadTarget::nvme) so.nvme_params_file = nvme_file("params");
  const auto layout = stage_layout(m, groups_.shape, groups_.coords.pp_rank);
  store_ = std::make_unique<ParamStore>(param_specs(m, groups_.shape, groups_.coords), layout.units, so, be_, groups_,
                                        host_pool_);
  const double tokens = static_cast<double>(plan.global_batch) * m.seq_len;
  loss_row_ = 1.0 / tokens;
  for (int c = 0; c < groups_.shape.chunks; ++c)
    chunks_.push_back(std::make_unique<GptStage>(m, plan, groups_, be_, *store_, static_cast<float>(loss_row_), c));
  // fp16 training scales the loss (Micikevicius et al. 2018, §3.2) with
  // DeepSpeed's dynamic rules; bf16 and fp32 need none (DeepSpeed's bf16 path).
  if (plan.precision == Precision::fp16) scaler_.emplace(opt.loss_scale);
}

Trainer::~Trainer() = default;

namespace {

// The scaler's part of a checkpoint payload: its fields in order, as the
// host lays them out (the shards are read back by the same build's ranks).
constexpr std::size_t kScalerStateBytes = sizeof(float) + 3 * sizeof(std::int64_t) + sizeof(std::int32_t);

void put(std::string& out, const void* v, std::size_t n) { out.append(static_cast<const char*>(v), n); }

template <class T>
T take(const std::string& in, std::size_t& at) {
  T v{};
  std::memcpy(&v, in.data() + at, sizeof v);
  at += sizeof v;
  return v;
}

}  // namespace

std::string Trainer::checkpoint_state() const {
  std::ostringstream params;
  store_->write_state(params);
  std::string out = params.str();
  if (scaler_) {
    const DynamicLossScaler::State s = scaler_->state();
    put(out, &s.scale, sizeof s.scale);
    put(out, &s.iter, sizeof s.iter);
    put(out, &s.last_overflow_iter, sizeof s.last_overflow_iter);
    put(out, &s.skipped, sizeof s.skipped);
    put(out, &s.hysteresis_left, sizeof s.hysteresis_left);
  }
  return out;
}

std::size_t Trainer::checkpoint_state_bytes(std::uint32_t version) const {
  return store_->state_bytes(version < kCheckpointMasterInParams) + (scaler_ && version >= 3 ? kScalerStateBytes : 0);
}

std::optional<std::string> Trainer::restore_checkpoint_state(const std::string& bytes, std::uint32_t version) {
  if (bytes.size() != checkpoint_state_bytes(version))
    return "holds " + std::to_string(bytes.size()) + " bytes of state, this rank's state has " +
           std::to_string(checkpoint_state_bytes(version));
  if (scaler_ && version < 3)
    return "written by an older ztune that did not keep fp16's loss scale, so the resumed run would not continue "
           "this one; start without --resume";
  const bool legacy_master = version < kCheckpointMasterInParams;
  const std::size_t params = store_->state_bytes(legacy_master);
  std::istringstream in(bytes.substr(0, params));
  store_->read_state(in, legacy_master);
  if (!scaler_) return std::nullopt;
  std::size_t at = params;
  DynamicLossScaler::State s;
  s.scale = take<float>(bytes, at);
  s.iter = take<std::int64_t>(bytes, at);
  s.last_overflow_iter = take<std::int64_t>(bytes, at);
  s.skipped = take<std::int64_t>(bytes, at);
  s.hysteresis_left = take<std::int32_t>(bytes, at);
  try {
    scaler_->restore(s);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return std::nullopt;
}

void Trainer::initialise() {
  const auto& specs = store_->specs();
  if (opt_.init_from.empty()) {
    store_->initialise([&](int id, float* out) { init_param(out, specs[static_cast<std::size_t>(id)], opt_.seed); });
    return;
  }
  SafetensorsFile file(opt_.init_from);
  store_->initialise([&](int id, float* out) {
    const auto& s = specs[static_cast<std::size_t>(id)];
    const auto full = file.read(s.name, s.hf_shape);
    for (std::size_t i = 0; i < s.shard.numel(); ++i) out[i] = full[s.shard.full_index(i)];
  });
}

MicroBatch Trainer::micro_batch(int step, int micro) const {
  // This data-parallel rank's slice of the step's batch: sequences
  // [dp_rank·mb·GA, (dp_rank + 1)·mb·GA), micro-batch `micro` of them.
  // With context parallelism the cp ranks of one dp rank read the same
  // sequences and keep their own seq_len/cp rows: the two load-balanced chunks
  // at their global positions (ring_attention.hpp).
  // With Ulysses each rank keeps its contiguous seq_len/u rows.
  const int t = m_.seq_len, cp = std::max(1, plan_.cp), u = std::max(1, plan_.ulysses), local = t / (cp * u);
  MicroBatch mb;
  mb.tokens.resize(static_cast<std::size_t>(plan_.micro_batch) * local);
  mb.targets.resize(mb.tokens.size());
  std::vector<std::int32_t> seq(static_cast<std::size_t>(t) + 1);
  for (int i = 0; i < plan_.micro_batch; ++i) {
    const std::int64_t index = static_cast<std::int64_t>(step) * plan_.global_batch +
                               static_cast<std::int64_t>(groups_.coords.dp_rank) * plan_.micro_batch * plan_.grad_accum +
                               static_cast<std::int64_t>(micro) * plan_.micro_batch + i;
    data_.sequence(index, t, seq.data());
    for (int j = 0; j < local; ++j) {
      const int pos = cp > 1  ? context_parallel_position(j, t, cp, groups_.coords.cp_rank)
                      : u > 1 ? groups_.coords.ulysses_rank * local + j
                              : j;
      mb.tokens[static_cast<std::size_t>(i * local + j)] = seq[static_cast<std::size_t>(pos)];
      mb.targets[static_cast<std::size_t>(i * local + j)] = seq[static_cast<std::size_t>(pos) + 1];
    }
  }
  return mb;
}

double Trainer::learning_rate(int step) const {
  const double lr = opt_.lr, min_lr = opt_.lr * opt_.min_lr_ratio;
  if (step < opt_.warmup_steps) return lr * (step + 1) / opt_.warmup_steps;
  const int decay = std::max(1, opt_.steps - opt_.warmup_steps);
  const double progress = std::min(1.0, static_cast<double>(step - opt_.warmup_steps) / decay);
  return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

double Trainer::run_pipeline(const std::vector<MicroBatch>& data) {
  auto& pp = *groups_.pp;
  const int p = plan_.pp, stage = groups_.coords.pp_rank, chunks = groups_.shape.chunks;
  const int next = (stage + 1) % p, prev = (stage + p - 1) % p;
  const std::size_t act_size = static_cast<std::size_t>(chunks_.front()->rows()) * chunks_.front()->hidden();
  const StorageDtype act_dtype = chunks_.front()->storage();  // activations and their gradients travel in it
  const auto schedule = pipeline_schedule(plan_.schedule, p, stage, plan_.grad_accum, chunks);
  std::size_t last_backward = 0;
  for (std::size_t i = 0; i < schedule.size(); ++i)
    if (!schedule[i].forward) last_backward = i;
  // Sends are asynchronous and receives blocking: with these schedules that
  // cannot deadlock. A send's buffer lives until the send completed, which is
  // checked without blocking at each new send (else an interleaved step would
  // hold all m·v of them).
  std::vector<std::pair<RequestPtr, Buffer>> sends;
  auto send = [&](ConstTensorRef src, int to, int tag) {
    std::erase_if(sends, [](auto& s) { return s.first->done(); });
    Buffer buf = be_.allocate(act_size, MemCategory::comm_buckets, act_dtype);
    be_.copy(buf.ref(), src, act_size);
    auto r = pp.send_async(buf.ref(), act_size, to, tag);
    sends.emplace_back(std::move(r), std::move(buf));
  };
  auto receive = [&](int from, int tag) {
    Buffer in = be_.allocate(act_size, MemCategory::comm_buckets, act_dtype);
    pp.recv(in.ref(), act_size, from, tag);
    return in;
  };
  double loss_sum = 0;
  for (std::size_t i = 0; i < schedule.size(); ++i) {
    const PipeAction& a = schedule[i];
    GptStage& chunk = *chunks_[static_cast<std::size_t>(a.chunk)];
    const int vstage = a.chunk * p + stage;  // the virtual stage this pass runs
    const bool first = vstage == 0, last = vstage == p * chunks - 1;
    const auto& mb = data[static_cast<std::size_t>(a.microbatch)];
    if (a.forward) {
      Buffer in;
      if (!first) in = receive(prev, pipe_tag(kTagActivation, a.chunk));
      const ConstTensorRef out = chunk.forward(a.microbatch, mb, in.ref());
      if (last) loss_sum += chunk.loss_sum(a.microbatch);
      else send(out, next, pipe_tag(kTagActivation, stage == p - 1 ? a.chunk + 1 : a.chunk));
    } else {
      Buffer dout;
      if (!last) dout = receive(next, pipe_tag(kTagGradient, a.chunk));
      const ConstTensorRef din = chunk.backward(a.microbatch, mb, dout.ref(), a.microbatch == plan_.grad_accum - 1);
      // Send before finishing the reduction: the tied-embedding sum in
      // finish_backward waits for the first stage, which waits for this gradient.
      if (!first) send(din, prev, pipe_tag(kTagGradient, stage == 0 ? a.chunk - 1 : a.chunk));
      store_->finish_backward(i == last_backward);
    }
  }
  for (auto& s : sends) s.first->wait();
  return loss_sum;
}

StepResult Trainer::step(int step) {
  const auto start = std::chrono::steady_clock::now();
  const bool last = groups_.last_stage();
  store_->begin_step(step);
  store_->zero_grads();
  if (scaler_ && scaler_->scale() != applied_scale_) {
    applied_scale_ = scaler_->scale();
    for (auto& c : chunks_) c->set_loss_scale(static_cast<float>(loss_row_ * applied_scale_));
  }
  std::vector<MicroBatch> data;
  for (int i = 0; i < plan_.grad_accum; ++i) data.push_back(micro_batch(step, i));
  const double loss_sum = run_pipeline(data);

  StepResult r;
  // The loss lives on the last stage; tensor-parallel ranks hold copies: count tp rank 0.
  double sums[2] = {last && groups_.coords.tp_rank == 0 ? loss_sum : 0.0, store_->owned_grad_sq()};
  groups_.world->all_reduce_doubles(sums, 2, ReduceOp::sum);
  r.loss = sums[0] / (static_cast<double>(plan_.global_batch) * m_.seq_len);
  r.grad_norm = std::sqrt(sums[1]);
  r.lr = learning_rate(step);
  if (scaler_) {
    // The gradients carry the loss scale. A non-finite norm (every rank sees
    // the same all-reduced sum) is an overflow: skip the step, let the scaler
    // shrink; otherwise unscale and go on (DeepSpeed's FP16_Optimizer.step).
    r.loss_scale = applied_scale_;
    const bool overflow = !std::isfinite(r.grad_norm);
    scaler_->update(overflow);  // throws LossScaleAtMinimum when it cannot shrink further
    if (overflow) {
      r.skipped = true;
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return r;
    }
    r.grad_norm /= applied_scale_;
    store_->scale_grads(1.0f / applied_scale_);
  }
  if (!opt_.dump_grads.empty() && !dumped_grads_) {
    auto tensors = collect_full(true);
    if (groups_.world->rank() == 0) write_safetensors(opt_.dump_grads, tensors, {{"what", "gradients of step 1"}});
    dumped_grads_ = true;
  }
  // 1-bit Adam's compression phase has no reduced gradient to clip (onebit_adam.hpp).
  if (opt_.grad_clip > 0 && r.grad_norm > opt_.grad_clip && !store_->gradients_local())
    store_->scale_grads(static_cast<float>(opt_.grad_clip / (r.grad_norm + 1e-6)));
  kernels::AdamWParams h;
  h.lr = static_cast<float>(r.lr);
  h.beta1 = opt_.beta1;
  h.beta2 = opt_.beta2;
  h.eps = opt_.eps;
  h.weight_decay = opt_.weight_decay;
  // Adam's bias correction counts applied steps (fp16 skips some).
  h.step = step + 1 - static_cast<int>(scaler_ ? scaler_->skipped_steps() : 0);
  store_->optimizer_step(h);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::vector<NamedTensor> Trainer::collect_full(bool grads) {
  auto& world = *groups_.world;
  const auto& specs = store_->specs();
  if (grads && plan_.zero_stage >= 2) throw std::logic_error("gradient dump needs ZeRO stage < 2");
  // Every rank: its local shards, concatenated (stage 3 gathers over dp: collective).
  std::vector<float> packed;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].tied_copy) continue;
    std::vector<float> v;
    if (grads) {
      // As the step will use them: widened to fp32 and times the pending unscale/clip factor.
      v.resize(specs[i].shard.numel());
      be_.to_host(v.data(), Backend::StagedIn(be_, store_->grad(static_cast<int>(i)), v.size()).data(), v.size());
      const float s = store_->pending_grad_scale();
      if (s != 1.0f)
        for (float& x : v) x *= s;
    } else {
      v = store_->local_values(static_cast<int>(i));
    }
    packed.insert(packed.end(), v.begin(), v.end());
  }
  const bool sender = groups_.coords.dp_rank == 0 && groups_.coords.cp_rank == 0;
  if (world.rank() != 0) {
    if (sender) world.send(packed.data(), packed.size(), 0, kTagCollect);
    return {};
  }
  std::map<std::string, NamedTensor> full;
  for (int p = 0; p < plan_.pp; ++p) {
    for (int t = 0; t < plan_.tp; ++t) {
      const Coordinates c{0, t, p};
      auto their = param_specs(m_, groups_.shape, c);
      std::size_t total = 0;
      for (const auto& s : their)
        if (!s.tied_copy) total += s.shard.numel();
      std::vector<float> buf;
      const int src = world_rank_of(c, groups_.shape);
      if (src == 0) {
        buf = packed;
      } else {
        buf.resize(total);
        world.recv(buf.data(), total, src, kTagCollect);
      }
      std::size_t off = 0;
      for (const auto& s : their) {
        if (s.tied_copy) continue;
        auto& nt = full[s.name];
        if (nt.values.empty()) {
          nt.name = s.name;
          nt.shape = s.hf_shape;
          nt.values.assign(s.shard.full_numel(), 0.0f);
        }
        for (std::size_t i = 0; i < s.shard.numel(); ++i) nt.values[s.shard.full_index(i)] = buf[off + i];
        off += s.shard.numel();
      }
    }
  }
  // Hugging Face order: embeddings, blocks, final norm.
  std::vector<NamedTensor> out;
  Coordinates all{0, 0, 0};
  GroupShape one{1, 1, 1};
  for (const auto& s : param_specs(m_, one, all)) out.push_back(std::move(full.at(s.name)));
  return out;
}

}  // namespace ztune::executor
