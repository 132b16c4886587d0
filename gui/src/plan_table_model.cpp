#include "ztune/gui/plan_table_model.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <limits>

#include <QColor>
#include <QStringList>

#include "ztune/gui/labels.hpp"
#include "ztune/gui/units.hpp"
#include "ztune/tuner/objective.hpp"

namespace ztune::gui {

namespace {

/// What a plan that does not fit overflows: "GPU memory", "host memory", "NVMe", joined.
QString overflow_of(const Candidate& c) {
  const auto& m = c.prediction.memory;
  QStringList out;
  if (!m.fits_gpu) out << QStringLiteral("GPU memory");
  if (!m.fits_host) out << QStringLiteral("host memory");
  if (!m.fits_nvme) out << QStringLiteral("NVMe");
  return out.join(QStringLiteral(", "));
}

}  // namespace

PlanTableModel::PlanTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void PlanTableModel::set_plans(std::vector<Candidate> plans, double tokens, Objective objective,
                               double gpu_hour_price, int layers) {
  beginResetModel();
  plans_ = std::move(plans);
  tokens_ = tokens;
  layers_ = layers;
  objective_ = objective;
  gpu_hour_price_ = gpu_hour_price;
  rebuild();
  endResetModel();
}

void PlanTableModel::clear() { set_plans({}, 0); }

bool PlanTableModel::passes(const Candidate& c) const {
  const Plan& p = c.plan;
  if (zero_stage_ && p.zero_stage != *zero_stage_) return false;
  if (hide_offload_ && (p.offload_optimizer != OffloadTarget::none || p.offload_params != OffloadTarget::none))
    return false;
  if (gpus_ && p.gpus() != *gpus_) return false;
  return true;
}

void PlanTableModel::rebuild() {
  order_.clear();
  for (int i = 0; i < total(); ++i)
    if (passes(plans_[static_cast<std::size_t>(i)])) order_.push_back(i);
  if (sort_column_ != rank || sort_order_ != Qt::AscendingOrder) {
    // One key per plan, then a stable sort: ties keep the rank order.
    std::vector<double> key(plans_.size());
    for (int i : order_) {
      const double k = sort_value(plans_[static_cast<std::size_t>(i)], i, sort_column_).toDouble();
      key[static_cast<std::size_t>(i)] = std::isnan(k) ? std::numeric_limits<double>::infinity() : k;  // a strict order
    }
    const bool up = sort_order_ == Qt::AscendingOrder;
    std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) {
      const double ka = key[static_cast<std::size_t>(a)], kb = key[static_cast<std::size_t>(b)];
      return up ? ka < kb : ka > kb;
    });
  }
  fetched_ = std::min(kFetchRows, matching());
}

void PlanTableModel::sort(int column, Qt::SortOrder order) {
  if (column < 0 || column >= column_count) return;
  replace_order([&] {
    sort_column_ = column;
    sort_order_ = order;
  });
}

void PlanTableModel::set_zero_stage(std::optional<int> stage) {
  if (stage != zero_stage_) replace_order([&] { zero_stage_ = stage; });
}

void PlanTableModel::set_hide_offload(bool hide) {
  if (hide != hide_offload_) replace_order([&] { hide_offload_ = hide; });
}

void PlanTableModel::set_gpus(std::optional<int> devices) {
  if (devices != gpus_) replace_order([&] { gpus_ = devices; });
}

void PlanTableModel::replace_order(const std::function<void()>& change) {
  beginResetModel();
  change();
  rebuild();
  endResetModel();
}

int PlanTableModel::plan_index(int row) const {
  if (row < 0 || row >= fetched_) return -1;
  return order_[static_cast<std::size_t>(row)];
}

const Candidate* PlanTableModel::candidate(int row) const {
  const int i = plan_index(row);
  return i < 0 ? nullptr : &plans_[static_cast<std::size_t>(i)];
}

int PlanTableModel::row_of(int plan_index) const {
  const auto it = std::find(order_.begin(), order_.end(), plan_index);
  return it == order_.end() ? -1 : static_cast<int>(it - order_.begin());
}

void PlanTableModel::fetch_to(int row) {
  if (row < fetched_ || row >= matching()) return;
  const int to = std::min(matching(), (row / kFetchRows + 1) * kFetchRows);
  beginInsertRows({}, fetched_, to - 1);
  fetched_ = to;
  endInsertRows();
}

int PlanTableModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : fetched_; }

int PlanTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : column_count; }

bool PlanTableModel::canFetchMore(const QModelIndex& parent) const {
  return !parent.isValid() && fetched_ < matching();
}

void PlanTableModel::fetchMore(const QModelIndex& parent) {
  if (parent.isValid() || fetched_ >= matching()) return;
  fetch_to(fetched_);
}

double PlanTableModel::days_of(const Candidate& c) const { return days_to_train(tokens_, c.time().tokens_per_s); }

QVariant PlanTableModel::display(const Candidate& c, int rank_index, int column) const {
  const Plan& p = c.plan;
  const auto& t = c.time();
  const auto& m = c.prediction.memory;
  switch (column) {
    case rank: return rank_index + 1;
    case gpus: return p.gpus();
    case layout: return layout_label(p, layers_);
    case zero: return zero_label(p);
    case offload: return offload_label(p);
    case batching: return batching_label(p);
    case recompute: return recompute_label(p);
    case attention: return attention_label(p);
    case schedule: return schedule_label(p);
    case precision: return precision_label(p);
    case gpu_memory: return format_bytes(m.gpu_total_bytes) + (m.fits() ? QString() : QStringLiteral(" ✘"));
    // The unit is in the header ("Tokens/s"): sixteen columns fit a 1600 px window.
    // A plan re-timed by the simulator is marked *, as `ztune search` marks it:
    // the best three rank by that time, the rest by the analytical one.
    case throughput:
      return c.timed ? format_count(t.tokens_per_s) + (c.simulated ? QStringLiteral("*") : QString())
                     : QStringLiteral("—");
    case tflops: return c.timed ? format_tflops(t.model_tflops_per_gpu) : QStringLiteral("—");
    case mfu: return c.timed ? format_percent(t.mfu) : QStringLiteral("—");
    // Under the cost objective: the cost each plan ranks by (Candidate::objective,
    // as `ztune search`'s GPU-hours column shows it).
    case days:
      if (!c.timed) return QStringLiteral("—");
      if (objective_ == Objective::cost)
        return gpu_hour_price_ > 0 ? QString::number(c.objective, 'f', 0) : format_count(c.objective);
      return format_days(days_of(c));
    case iteration: return c.timed ? format_duration(t.iteration_s) : QStringLiteral("—");
    default: return {};
  }
}

QVariant PlanTableModel::sort_value(const Candidate& c, int rank_index, int column) const {
  const Plan& p = c.plan;
  const auto& t = c.time();
  switch (column) {
    case rank: return rank_index + 1;
    case gpus: return p.gpus();
    // Layouts sort by pipeline depth, then tensor width, then context parallelism:
    // the order people compare them in.
    case layout: return p.pp * 100000 + p.tp * 100 + (p.cp * p.ulysses - 1) * 10 + p.virtual_stages;
    case zero: return p.zero_stage;
    case offload: return static_cast<int>(p.offload_optimizer) + 3 * static_cast<int>(p.offload_params);
    case batching: return p.micro_batch * 100000 + p.grad_accum;
    // By how much is recomputed: none, selective, Megatron's block method by
    // its layers a chunk, then every layer.
    case recompute:
      return 1000 * static_cast<int>(p.recompute) -
             (p.recompute_num_layers > 0 ? 1000 - std::min(p.recompute_num_layers, 999) : 0);
    // Dense kernels first (in the enum's order), then the sparse layouts.
    case attention:
      return static_cast<int>(p.attention) +
             static_cast<int>(std::size(kAttentionKernelNames)) * static_cast<int>(p.sparse_attention);
    case schedule: return static_cast<int>(p.schedule);
    case precision: return static_cast<int>(p.precision);
    case gpu_memory: return c.prediction.memory.gpu_total_bytes;
    case throughput: return t.tokens_per_s;
    case tflops: return t.model_tflops_per_gpu;
    case mfu: return t.mfu;
    case days: return objective_ == Objective::cost ? c.objective : days_of(c);
    case iteration: return t.iteration_s;
    default: return {};
  }
}

QVariant PlanTableModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const int row = plan_index(index.row());
  const Candidate& c = plans_[static_cast<std::size_t>(row)];
  switch (role) {
    case Qt::DisplayRole: return display(c, row, index.column());
    case SortRole: return sort_value(c, row, index.column());
    case ZeroStageRole: return c.plan.zero_stage;
    case OffloadRole:
      return c.plan.offload_optimizer != OffloadTarget::none || c.plan.offload_params != OffloadTarget::none;
    case CandidateRole: return row;
    case SimulatedRole: return c.simulated.has_value();
    case Qt::ToolTipRole: {
      QString tip = QString::fromStdString(c.plan.summary());
      if (index.column() == gpu_memory)
        tip += QStringLiteral("\n%1 of %2 per GPU%3")
                   .arg(format_bytes(c.prediction.memory.gpu_total_bytes),
                        format_bytes(c.prediction.memory.gpu_capacity_bytes),
                        c.prediction.memory.fits() ? QString()
                                                   : QStringLiteral(": does not fit (%1)").arg(overflow_of(c)));
      if (c.simulated) tip += QStringLiteral("\ntime from the simulator");
      return tip;
    }
    case Qt::ForegroundRole:
      // A plan that does not fit (the closest ones, when nothing fits): its memory in red.
      if (index.column() == gpu_memory && !c.prediction.memory.fits()) return QColor(Qt::red);
      return {};
    case Qt::TextAlignmentRole: {
      const int col = index.column();
      const bool numeric = col == rank || col == gpus || col >= gpu_memory;
      return static_cast<int>((numeric ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignVCenter);
    }
    default: return {};
  }
}

QVariant PlanTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= column_count) return {};
  if (role == Qt::DisplayRole) {
    // Short names where the header would be wider than its cells (the tooltip
    // has the long one): sixteen columns fit a 1600 px window (issue 23).
    static const char* const kNames[column_count] = {"#",       "GPUs",    "Layout", "ZeRO",
                                                     "Offload", "mb×GAS",  "Recomp.", "Attn.",
                                                     "Sched.",  "Prec.",   "Memory", "Tokens/s",
                                                     "FLOP/s",  "MFU",     "Days",   "Iteration"};
    if (section == days && objective_ == Objective::cost)
      return gpu_hour_price_ > 0 ? QStringLiteral("Cost") : QStringLiteral("GPU-hours");
    return QString::fromUtf8(kNames[section]);
  }
  if (role == Qt::ToolTipRole) {
    if (section == days && objective_ == Objective::cost)
      return gpu_hour_price_ > 0 ? QStringLiteral("cost of training the token budget, at the GPU-hour price given")
                                 : QStringLiteral("GPU-hours to train the token budget (no GPU-hour price given)");
    switch (section) {
      case batching: return QStringLiteral("micro-batch × gradient accumulation steps");
      case recompute:
        return QStringLiteral("activation recomputation: none, selective (attention core), full (every layer) or "
                              "full:blockN (Megatron's block method: the first N layers of each model chunk)");
      case schedule: return QStringLiteral("pipeline schedule");
      case precision: return QStringLiteral("training precision (16-bit: mixed, with fp32 master weights)");
      case gpu_memory: return QStringLiteral("GPU memory on the most loaded GPU");
      case attention:
        return QStringLiteral("attention kernel: standard (s×s scores stored), flash (FlashAttention-2), cudnn "
                              "(cuDNN's fused attention), eager (standard with the softmax chain unfused), or a "
                              "block-sparse layout");
      case throughput:
        return QStringLiteral("tokens per second, the whole job (*: timed by the simulator, which ranks the best "
                              "plans; the others by the analytical model)");
      case tflops: return QStringLiteral("model FLOP/s per GPU (no recomputation counted)");
      case mfu: return QStringLiteral("model FLOPs utilisation");
      case days: return QStringLiteral("days to train the token budget");
      default: return {};
    }
  }
  return {};
}

}  // namespace ztune::gui
