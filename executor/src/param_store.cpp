#include "ztune/executor/param_store.hpp"

#include <algorithm>
#include <cassert>
#include <istream>
#include <ostream>
#include <stdexcept>

#include "buffer_io.hpp"
#include "ztune/executor/nvme_param_partitions.hpp"
#include "ztune/executor/optimizer_states.hpp"
#include "ztune/executor/zeropp_reduce.hpp"
#include "ztune/vocab/executor_support.hpp"

namespace ztune::executor {

struct ParamStore::Bucket {
  int first_unit = 0, last_unit = 0;
  int first_param = 0, end_param = 0;
  std::size_t numel = 0, padded = 0, piece = 0;
  std::size_t offset = 0;        // in the full flat buffers
  std::size_t shard_offset = 0;  // in the owned-piece buffers
  bool deferred = false;         // reduced in finish_backward (tied embedding, or no overlap)
  bool persistent = false;       // stage 3: stays gathered until the optimizer step
  bool has_sp_partial = false;
  int units_done = 0;
  int refs = 0;
  Buffer gathered;               // stage 3
  bool gathered_quantized = false;  // ZeRO++: gathered in int8 (qwZ)
  bool gathered_from_secondary = false;  // ZeRO++ hpZ: a backward gather inside the node
  std::size_t secondary_offset = 0;  // hpZ: this rank's slice of the bucket in secondary_
  std::size_t secondary_piece = 0;   // padded / ranks per node
  bool secondary_valid = false;      // holds this step's weights (since the last forward gather)
  RequestPtr gather_req;
  Buffer grad_work;              // stages 2/3: this micro-batch's full-bucket gradients (a comm bucket:
                                 //   filled by the backward, reduce-scattered, freed; the memory
                                 //   model's comm_buckets line, as DeepSpeed's ipg buckets)
};

struct ParamStore::Pending {
  int bucket = 0;
  RequestPtr request;
  Buffer recv;  // stages 2/3: reduce-scattered piece, added to the owned gradients
};

ParamStore::ParamStore(std::vector<ParamSpec> specs, int units, const StoreOptions& options, Backend& backend,
                       ProcessGroups& groups, kernels::ThreadPool& host_pool)
    : specs_(std::move(specs)), opt_(options), be_(backend), g_(groups) {
  const StorageDtype dt = opt_.storage, gdt = opt_.grad_storage;
  if (dt != StorageDtype::fp32 && !opt_.nvme_params_file.empty())
    throw std::logic_error("16-bit storage with parameters on NVMe (refused by executor_support)");
  if (gdt != StorageDtype::fp32 && gdt != dt)
    throw std::logic_error("16-bit gradients of another type than the parameters (refused by executor_support)");
  dp_ = g_.dp->size();
  dp_rank_ = g_.dp->rank();
  // Units' sizes, then greedy buckets of consecutive units up to bucket_elems.
  std::vector<std::size_t> unit_numel(static_cast<std::size_t>(units), 0);
  for (const auto& p : specs_) unit_numel[static_cast<std::size_t>(p.unit)] += p.shard.numel();
  unit_bucket_.assign(static_cast<std::size_t>(units), 0);
  for (int u = 0; u < units; ++u) {
    const bool fits = !buckets_.empty() &&
                      static_cast<double>(buckets_.back().numel + unit_numel[static_cast<std::size_t>(u)]) <=
                          opt_.bucket_elems;
    if (!fits) {
      buckets_.emplace_back();
      buckets_.back().first_unit = u;
    }
    buckets_.back().last_unit = u;
    buckets_.back().numel += unit_numel[static_cast<std::size_t>(u)];
    unit_bucket_[static_cast<std::size_t>(u)] = static_cast<int>(buckets_.size()) - 1;
  }
  param_offset_.resize(specs_.size());
  param_bucket_.resize(specs_.size());
  std::vector<std::size_t> fill(buckets_.size(), 0);
  for (auto& b : buckets_) b.first_param = -1;
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    const int bi = unit_bucket_[static_cast<std::size_t>(specs_[i].unit)];
    auto& b = buckets_[static_cast<std::size_t>(bi)];
    if (b.first_param < 0) b.first_param = static_cast<int>(i);
    b.end_param = static_cast<int>(i) + 1;
    param_bucket_[i] = bi;
    param_offset_[i] = fill[static_cast<std::size_t>(bi)];
    fill[static_cast<std::size_t>(bi)] += specs_[i].shard.numel();
    if (specs_[i].sp_partial && opt_.sequence_parallel) b.has_sp_partial = true;
    const bool tied = specs_[i].word_embedding && g_.embed != nullptr;
    if (tied || !opt_.overlap_comm) b.deferred = true;
  }
  for (auto& b : buckets_) {
    b.piece = (b.numel + static_cast<std::size_t>(dp_) - 1) / static_cast<std::size_t>(dp_);
    b.padded = b.piece * static_cast<std::size_t>(dp_);
    b.offset = full_size_;
    b.shard_offset = shard_size_;
    full_size_ += b.padded;
    shard_size_ += b.piece;
    b.persistent = stage3();
    for (int i = b.first_param; i < b.end_param && !opt_.hold_gathered; ++i)
      if (static_cast<double>(specs_[static_cast<std::size_t>(i)].shard.numel()) >= opt_.persistence_threshold)
        b.persistent = false;
  }
  // Storage by stage (ZeRO paper §5: P_os, P_os+g, P_os+g+p).
  if (stage3() && !opt_.nvme_params_file.empty()) {
    if (!opt_.offload_params) throw std::logic_error("nvme_params_file without offload_params");
    std::vector<std::size_t> pieces;
    std::size_t largest = 0;
    for (const auto& b : buckets_) {
      pieces.push_back(b.piece);
      largest = std::max(largest, b.piece);
    }
    nvme_params_ = std::make_unique<NvmeParamPartitions>(opt_.nvme_params_file, pieces);
    param_stage_ = be_.allocate(largest, MemCategory::host_staging);
  } else if (stage3()) {
    param_shards_ =
        be_.allocate(shard_size_, opt_.offload_params ? MemCategory::host_params : MemCategory::params, dt);
  } else {
    params_ = be_.allocate(full_size_, MemCategory::params, dt);
  }
  if (opt_.hold_gathered && (!stage3() || opt_.zeropp || opt_.offload_params))
    throw std::logic_error("hold_gathered is ZeRO-3 under a pipeline, without ZeRO++ or offload (check_plan)");
  if (whole_grads()) grads_ = be_.allocate(full_size_, MemCategory::grads, gdt);
  if (opt_.zero_stage >= 2) grad_shards_ = be_.allocate(shard_size_, MemCategory::grads, gdt);
  // 1-bit Adam works on the replicated flat buffers; with offload it is not used.
  if (!opt_.offload_optimizer && opt_.onebit_freeze_step >= 0 && opt_.zero_stage != 0)
    throw std::logic_error("1-bit Adam needs ZeRO stage 0");
  const OptimizerStateOptions states{opt_.offload_optimizer, opt_.nvme_file, opt_.onebit_freeze_step, dt, gdt,
                                     opt_.optimizer_states};
  optimizer_ = std::make_unique<OptimizerStates>(opt_.zero_stage >= 1 ? shard_size_ : full_size_, states, *g_.dp,
                                                 be_, host_pool);
  // ZeRO++ hpZ (Wang et al. 2023, §3.2) across nodes: each rank keeps a
  // 1/(ranks per node) slice of every quantized bucket's gathered weights, so the
  // backward gathers inside the node only. Node-major dp ranks make the slices
  // of one node's ranks, in dp_intra order, the whole bucket.
  if (stage3() && opt_.zeropp && g_.dp_intra != nullptr) {
    const auto per_node = static_cast<std::size_t>(g_.dp_intra->size());
    std::size_t total = 0;
    for (auto& b : buckets_) {
      if (!quantized_gathers(b)) continue;
      b.secondary_piece = b.padded / per_node;  // padded = piece · dp, dp = per_node · nodes
      b.secondary_offset = total;
      total += b.secondary_piece;
    }
    secondary_ = be_.allocate(total, MemCategory::params, dt);
  }
}

ParamStore::~ParamStore() {
  for (auto& p : pending_)
    if (p.request) p.request->wait();  // qgZ across nodes reduces synchronously: no request
  for (auto& b : buckets_)
    if (b.gather_req) b.gather_req->wait();
}

int ParamStore::buckets() const { return static_cast<int>(buckets_.size()); }

bool ParamStore::gradients_local() const { return optimizer_->gradients_local(step_); }

std::optional<bool> ParamStore::nvme_direct_io() const {
  const std::optional<bool> states = optimizer_->nvme_direct_io();
  if (!states && !nvme_params_) return std::nullopt;
  return states.value_or(true) && (!nvme_params_ || nvme_params_->direct_io());
}

int ParamStore::find(std::string_view name, int unit) const {
  for (std::size_t i = 0; i < specs_.size(); ++i)
    if (specs_[i].unit == unit && specs_[i].name == name) return static_cast<int>(i);
  return -1;
}

ParamStore::Bucket& ParamStore::bucket_of_unit(int unit) {
  return buckets_[static_cast<std::size_t>(unit_bucket_[static_cast<std::size_t>(unit)])];
}

TensorRef ParamStore::param(int id) {
  const auto i = static_cast<std::size_t>(id);
  auto& b = buckets_[static_cast<std::size_t>(param_bucket_[i])];
  if (!stage3()) return params_.ref(b.offset + param_offset_[i]);
  assert(!b.gathered.empty() && !b.gather_req && "ZeRO-3 parameter used outside acquire/release");
  return b.gathered.ref(param_offset_[i]);
}

TensorRef ParamStore::grad(int id) {
  const auto i = static_cast<std::size_t>(id);
  auto& b = buckets_[static_cast<std::size_t>(param_bucket_[i])];
  if (whole_grads()) return grads_.ref(b.offset + param_offset_[i]);
  if (b.grad_work.empty()) b.grad_work = be_.allocate(b.padded, MemCategory::comm_buckets, opt_.grad_storage);
  return b.grad_work.ref(param_offset_[i]);
}

std::size_t ParamStore::bucket_index(const Bucket& b) const { return static_cast<std::size_t>(&b - buckets_.data()); }

ConstTensorRef ParamStore::owned_param_values(Bucket& b) {
  if (!nvme_params_) return owned_param_piece(b);
  nvme_params_->read(bucket_index(b), param_stage_.data());
  return param_stage_.data();
}

TensorRef ParamStore::owned_param_piece(Bucket& b) {
  assert(!nvme_params_ && "the partitions are on NVMe: owned_param_values");
  if (stage3()) return param_shards_.ref(b.shard_offset);
  return params_.ref(b.offset + static_cast<std::size_t>(dp_rank_) * b.piece);
}

TensorRef ParamStore::owned_grad_piece(Bucket& b) {
  if (opt_.zero_stage >= 2) return grad_shards_.ref(b.shard_offset);
  return grads_.ref(b.offset + static_cast<std::size_t>(dp_rank_) * b.piece);
}

// ZeRO++ (Wang et al. 2023, §3): weight gathers carry int8 (qwZ) and gradients
// are reduced in int4 (qgZ), both symmetric in groups of this many elements (the
// cost model's kZeroppWeightBytes / kZeroppGradBytes). The backward uses the same
// dequantized weights: DeepSpeed gathers it from hpZ's secondary partition,
// which _partition_param_sec copies from the forward's (dequantized) gather
// (deepspeed/runtime/zero/partition_parameters.py). Persistent buckets are not
// partitioned in DeepSpeed, so they are never quantized.
namespace {
constexpr long kZeroppGroup = 2048;
constexpr int kZeroppWeightBits = 8;
constexpr int kZeroppGradBits = 4;
}  // namespace

bool ParamStore::hpz(const Bucket& b) const { return !secondary_.empty() && b.secondary_piece > 0; }

void ParamStore::start_gather(Bucket& b, bool quantized, Direction dir) {
  b.gathered = be_.allocate(b.padded, MemCategory::zero3_gathered, opt_.storage);
  b.gathered_from_secondary = quantized && dir == Direction::backward && hpz(b) && b.secondary_valid;
  if (b.gathered_from_secondary) {
    // hpZ: the forward's dequantized weights from the node's secondary slices.
    b.gathered_quantized = true;
    b.gather_req = g_.dp_intra->all_gather_async(secondary_.ref(b.secondary_offset), b.gathered.ref(),
                                                 b.secondary_piece);
    return;
  }
  const TensorRef mine = b.gathered.ref(static_cast<std::size_t>(dp_rank_) * b.piece);
  if (opt_.offload_params) {
    // The partition comes up from the host first (ZeRO-Infinity's parameter
    // fetch), and to the host from the drive before that when it lives there.
    ScopedOp t(be_.ops(), OpKind::offload_copy, static_cast<double>(b.piece * storage_bytes(opt_.storage)));
    be_.from_host(mine, owned_param_values(b).ptr, b.piece);
  } else {
    be_.copy(mine, param_shards_.ref(b.shard_offset), b.piece);
  }
  // qwZ: every rank sends its piece as int8; all of them (itself included) use
  // the dequantized values, so quantizing the piece before the gather is the same.
  b.gathered_quantized = quantized;
  if (quantized)
    be_.quantize_dequantize(mine, static_cast<long>(b.piece), kZeroppWeightBits, kZeroppGroup);
  b.gather_req = g_.dp->all_gather_async(mine, b.gathered.ref(), b.piece);
}

bool ParamStore::quantized_gathers(const Bucket& b) const { return opt_.zeropp && !b.persistent; }

void ParamStore::acquire(int unit, Direction dir) { acquire_bucket(unit, dir, false, true); }

void ParamStore::acquire_out_of_order(int unit, Direction dir) { acquire_bucket(unit, dir, false, false); }

void ParamStore::acquire_bucket(int unit, Direction dir, bool full_precision, bool prefetch) {
  if (!stage3()) return;
  auto& b = bucket_of_unit(unit);
  const bool quantized = !full_precision && quantized_gathers(b);
  if (!b.gathered.empty() && b.gathered_quantized != quantized) {
    // ZeRO++: the values asked for are not the ones gathered (a checkpoint wants the
    // full-precision weights); nothing holds the bucket between uses.
    assert(b.refs == 0);
    if (b.gather_req) b.gather_req->wait();
    b.gather_req.reset();
    b.gathered.release();
  }
  if (b.gathered.empty()) start_gather(b, quantized, dir);
  if (b.gather_req) {
    b.gather_req->wait();
    b.gather_req.reset();
    if (quantized && hpz(b) && !b.gathered_from_secondary) {
      // hpZ: keep this rank's slice of the weights just gathered across nodes.
      be_.copy(secondary_.ref(b.secondary_offset),
               b.gathered.ref(static_cast<std::size_t>(g_.dp_intra->rank()) * b.secondary_piece), b.secondary_piece);
      b.secondary_valid = true;
    }
  }
  ++b.refs;
  if (full_precision || !prefetch) return;
  // Prefetch the bucket the next layer will need (ZeRO-3 prefetch, one bucket ahead).
  const int bi = unit_bucket_[static_cast<std::size_t>(unit)];
  const int next = dir == Direction::forward ? bi + 1 : bi - 1;
  if (next >= 0 && next < buckets() && buckets_[static_cast<std::size_t>(next)].gathered.empty()) {
    auto& nb = buckets_[static_cast<std::size_t>(next)];
    start_gather(nb, quantized_gathers(nb), dir);
  }
}

void ParamStore::release(int unit) {
  if (!stage3()) return;
  auto& b = bucket_of_unit(unit);
  assert(b.refs > 0);
  if (--b.refs == 0 && !b.persistent) b.gathered.release();
}

void ParamStore::initialise(const std::function<void(int, float*)>& fill) {
  for (auto& b : buckets_) {
    // Build the full bucket, then keep what this rank stores.
    Buffer full = be_.allocate(b.padded, MemCategory::workspace);
    std::vector<float> host;
    for (int i = b.first_param; i < b.end_param; ++i) {
      const auto& s = specs_[static_cast<std::size_t>(i)];
      host.assign(s.shard.numel(), 0.0f);
      fill(i, host.data());
      be_.from_host(full.data() + param_offset_[static_cast<std::size_t>(i)], host.data(), host.size());
    }
    // Stored in storage(): a 16-bit store keeps the values rounded, and the
    // masters below start from those (Megatron's and DeepSpeed's fp32 copies of
    // the 16-bit model).
    if (nvme_params_) {
      be_.to_host(param_stage_.data(), full.data() + static_cast<std::size_t>(dp_rank_) * b.piece, b.piece);
      nvme_params_->write(bucket_index(b), param_stage_.data());
    } else if (stage3()) {
      be_.copy(param_shards_.ref(b.shard_offset), full.data() + static_cast<std::size_t>(dp_rank_) * b.piece,
               b.piece);
    } else {
      be_.copy(params_.ref(b.offset), full.data(), b.padded);
    }
  }
  if (optimizer_->has_master()) {
    for (auto& b : buckets_) {
      const std::size_t off = opt_.zero_stage >= 1 ? b.shard_offset : b.offset;
      const std::size_t len = opt_.zero_stage >= 1 ? b.piece : b.padded;
      const ConstTensorRef src = opt_.zero_stage >= 1 ? owned_param_values(b) : params_.ref(b.offset);
      optimizer_->initialise_master(off, src, len);
    }
  }
}

std::vector<float> ParamStore::local_values(int id) {
  const auto i = static_cast<std::size_t>(id);
  const auto unit = specs_[i].unit;
  acquire_bucket(unit, Direction::forward, true, false);  // the stored values, not ZeRO++'s int8 copy
  std::vector<float> out(specs_[i].shard.numel());
  be_.to_host(out.data(), Backend::StagedIn(be_, param(id), out.size()).data(), out.size());
  release(unit);
  // acquire() may have prefetched the next bucket: settle it so nothing is in flight.
  for (auto& b : buckets_) {
    if (b.gather_req) {
      b.gather_req->wait();
      b.gather_req.reset();
    }
    if (stage3() && b.refs == 0 && !b.persistent) b.gathered.release();
  }
  return out;
}

void ParamStore::zero_grads() {
  if (!grads_.empty()) be_.zero(grads_.ref(), grads_.size());
  if (!grad_shards_.empty()) be_.zero(grad_shards_.ref(), grad_shards_.size());
  grad_scale_ = 1.0f;
  for (auto& b : buckets_) b.units_done = 0;
}

void ParamStore::sync_replicas(Bucket& b) {
  // Under sequence parallelism each tensor-parallel rank saw only its part of the
  // sequence: sum the replicated tensors' gradients over the group (Korthikanti §4.2.2).
  if (!b.has_sp_partial) return;
  for (int i = b.first_param; i < b.end_param; ++i) {
    const auto& s = specs_[static_cast<std::size_t>(i)];
    if (s.sp_partial) g_.tp->all_reduce(grad(i), s.shard.numel());
  }
}

void ParamStore::launch_reduction(Bucket& b) {
  sync_replicas(b);
  Pending p;
  p.bucket = static_cast<int>(&b - buckets_.data());
  if (opt_.zero_stage < 2) {
    if (dp_ == 1 || gradients_local()) return;  // 1-bit Adam exchanges the momentum instead
    p.request = g_.dp->all_reduce_async(grads_.ref(b.offset), b.padded);
  } else {
    // Held (ZeRO-3 under a pipeline): the step's whole gradients, reduced in place.
    if (!whole_grads() && b.grad_work.empty())
      b.grad_work = be_.allocate(b.padded, MemCategory::comm_buckets, opt_.grad_storage);
    const TensorRef full = whole_grads() ? grads_.ref(b.offset) : b.grad_work.ref();
    p.recv = be_.allocate(b.piece, MemCategory::comm_buckets, opt_.grad_storage);
    if (opt_.zeropp && g_.dp_inter != nullptr) {
      // qgZ across nodes: int4 inside the node, the node's partials int4 again
      // across nodes (zeropp_reduce.hpp). Synchronous: no request to wait for.
      // Its int4 arithmetic is fp32 (and quantizes the bucket in place, which
      // is consumed here): a 16-bit bucket goes through fp32 copies.
      Backend::StagedOut in(be_, full, b.padded, true);
      Backend::StagedOut out(be_, p.recv.ref(), b.piece, false);
      hierarchical_quantized_reduce_scatter(be_, *g_.dp_intra, *g_.dp_inter, in, out, b.piece, kZeroppGradBits,
                                            kZeroppGroup);
      out.commit();
    } else {
      // qgZ on one node: each rank's contribution crosses the wire as int4 and
      // is summed once, in full precision.
      if (opt_.zeropp && dp_ > 1)
        be_.quantize_dequantize(b.grad_work.ref(), static_cast<long>(b.padded), kZeroppGradBits, kZeroppGroup);
      p.request = g_.dp->reduce_scatter_async(full, p.recv.ref(), b.piece);
    }
  }
  pending_.push_back(std::move(p));
  // Stages 2/3 free a bucket's full gradients once its piece has arrived:
  // with more reductions running than kExecutorReductionsInFlight the oldest is
  // awaited now, not at the end of the backward (stages 0/1 reduce the
  // gradients in place, which stay).
  if (opt_.zero_stage >= 2 && pending_.size() > kExecutorReductionsInFlight) retire_oldest();
}

void ParamStore::retire_oldest() {
  Pending& p = pending_.front();
  if (p.request) p.request->wait();
  if (opt_.zero_stage >= 2) {
    auto& b = buckets_[static_cast<std::size_t>(p.bucket)];
    be_.accumulate(grad_shards_.ref(b.shard_offset), p.recv.ref(), static_cast<long>(b.piece));
    b.grad_work.release();
  }
  pending_.erase(pending_.begin());
}

void ParamStore::bucket_ready(Bucket& b, bool last_micro) {
  const bool reduce_now = reduces_every_micro() || last_micro;
  if (reduce_now && !b.deferred) launch_reduction(b);
}

// Stages 2/3 reduce every micro-batch, so a bucket counts its units per
// micro-batch (finish_backward resets the count). Stages 0/1, and stage 3
// held under a pipeline, reduce once, after
// each unit's last micro-batch: only those count, and the count lasts the whole
// step, because with interleaved 1F1B one micro-batch's backward reaches the
// stage's model chunks at different times, between other micro-batches' passes.
void ParamStore::unit_backward_done(int unit, bool last_micro) {
  if (!reduces_every_micro() && !last_micro) return;
  auto& b = bucket_of_unit(unit);
  if (++b.units_done == b.last_unit - b.first_unit + 1) bucket_ready(b, last_micro);
}

void ParamStore::finish_backward(bool last_micro) {
  const bool reduce_now = reduces_every_micro() || last_micro;
  for (auto& b : buckets_) {
    if (reduces_every_micro()) b.units_done = 0;
    if (!reduce_now || !b.deferred) continue;
    // Tied embeddings across stages: first and last stage sum their wte gradients.
    if (g_.embed != nullptr && last_micro) {
      for (int i = b.first_param; i < b.end_param; ++i)
        if (specs_[static_cast<std::size_t>(i)].word_embedding)
          g_.embed->all_reduce(grad(i), specs_[static_cast<std::size_t>(i)].shard.numel());
    }
    launch_reduction(b);
  }
  while (!pending_.empty()) retire_oldest();
  // Hybrid sharding (MiCS' two-hop synchronisation): the shard group summed
  // each micro-batch's gradients into their owners' partitions; at the
  // accumulation boundary the partitions are summed across the replicas, the
  // ranks that own the same piece in the other shard groups.
  if (g_.replica != nullptr && last_micro && opt_.zero_stage >= 2)
    g_.replica->all_reduce(grad_shards_.ref(), grad_shards_.size());
}

double ParamStore::owned_grad_sq() {
  double s = 0;
  // Hybrid sharding: every replica owns the same pieces; count one of them.
  if (g_.replica != nullptr && g_.replica->rank() != 0) return s;
  for (auto& b : buckets_) {
    const std::size_t lo = static_cast<std::size_t>(dp_rank_) * b.piece, hi = lo + b.piece;
    const ConstTensorRef g = owned_grad_piece(b);
    for (int i = b.first_param; i < b.end_param; ++i) {
      const auto& spec = specs_[static_cast<std::size_t>(i)];
      if (!spec.counted_in_norm) continue;
      const std::size_t p0 = param_offset_[static_cast<std::size_t>(i)], p1 = p0 + spec.shard.numel();
      const std::size_t a = std::max(lo, p0), e = std::min(hi, p1);
      if (a < e) s += be_.sum_squares(g + (a - lo), static_cast<long>(e - a));
    }
  }
  return s;
}

void ParamStore::scale_grads(float s) {
  if (opt_.grad_storage != StorageDtype::fp32) {
    // 16-bit gradients keep their values; the step multiplies its fp32 copies
    // (small unscaled fp16 gradients would flush to zero in place).
    grad_scale_ *= s;
    return;
  }
  if (opt_.zero_stage == 0) {
    be_.scale(grads_.ref(), s, static_cast<long>(grads_.size()));
    return;
  }
  for (auto& b : buckets_) be_.scale(owned_grad_piece(b), s, static_cast<long>(b.piece));
}

void ParamStore::optimizer_step(const kernels::AdamWParams& h) {
  for (auto& b : buckets_) b.secondary_valid = false;  // hpZ: the next forward gathers the new weights
  if (opt_.zero_stage == 0) {
    // Every rank updated the whole replicated buffer: nothing to gather.
    optimizer_->step_replicated(params_.ref(), grads_.ref(), h, step_, grad_scale_);
    grad_scale_ = 1.0f;
    return;
  }
  if (nvme_params_) {
    // Partitions on NVMe: up from the drive, updated in the staging buffer, back down.
    for (auto& b : buckets_) {
      nvme_params_->read(bucket_index(b), param_stage_.data());
      optimizer_->step(param_stage_.data(), owned_grad_piece(b), b.shard_offset, b.piece, h);
      be_.fence();  // a GPU Adam may still be writing the (pinned) staging buffer
      nvme_params_->write(bucket_index(b), param_stage_.data());
    }
  } else {
    // Every bucket's owned piece at once: one fused AdamW when the states are on the device.
    std::vector<OptimizerStates::Range> owned;
    for (auto& b : buckets_) owned.push_back({owned_param_piece(b), owned_grad_piece(b), b.shard_offset, b.piece});
    optimizer_->step(owned, h, grad_scale_);
  }
  grad_scale_ = 1.0f;
  if (stage3()) {
    for (auto& b : buckets_) b.gathered.release();  // persistent copies are stale now
    return;
  }
  std::vector<RequestPtr> gathers;
  for (auto& b : buckets_) {
    const TensorRef mine = params_.ref(b.offset + static_cast<std::size_t>(dp_rank_) * b.piece);
    if (dp_ > 1) gathers.push_back(g_.dp->all_gather_async(mine, params_.ref(b.offset), b.piece));
  }
  for (auto& r : gathers) r->wait();
}

std::size_t ParamStore::state_bytes(bool legacy_master) const {
  return (stage3() ? shard_size_ : full_size_) * storage_bytes(opt_.storage) + optimizer_->state_bytes(legacy_master);
}

// With the partitions on NVMe the checkpoint holds them in the same layout as
// param_shards_ (bucket after bucket), so the format does not depend on where
// they lived.
void ParamStore::write_param_state(std::ostream& out) const {
  if (!nvme_params_) {
    write_buffer(out, stage3() ? param_shards_ : params_, be_);
    return;
  }
  for (const auto& b : buckets_) {
    nvme_params_->read(bucket_index(b), param_stage_.data());
    out.write(reinterpret_cast<const char*>(param_stage_.data()), static_cast<std::streamsize>(b.piece * sizeof(float)));
  }
}

void ParamStore::read_param_state(std::istream& in) {
  if (!nvme_params_) {
    read_buffer(in, stage3() ? param_shards_ : params_, be_);
    return;
  }
  for (auto& b : buckets_) {
    in.read(reinterpret_cast<char*>(param_stage_.data()), static_cast<std::streamsize>(b.piece * sizeof(float)));
    if (!in) throw std::runtime_error("checkpoint ends early");
    nvme_params_->write(bucket_index(b), param_stage_.data());
  }
}

void ParamStore::write_state(std::ostream& out) const {
  write_param_state(out);
  optimizer_->write_state(out);
}

void ParamStore::read_state(std::istream& in, bool legacy_master) {
  read_param_state(in);
  optimizer_->read_state(in, legacy_master);
}

}  // namespace ztune::executor
