#include "ztune/gui/compare_model.hpp"

#include <QFont>

#include "ztune/gui/labels.hpp"
#include "ztune/gui/units.hpp"
#include "ztune/tuner/objective.hpp"

namespace ztune::gui {
namespace {

/// +1: larger is better, -1: smaller is better, 0: not ranked.
int better(int row) {
  switch (row) {
    case CompareModel::throughput:
    case CompareModel::tflops:
    case CompareModel::mfu:
    case CompareModel::hfu: return 1;
    case CompareModel::gpu_memory:
    case CompareModel::iteration:
    case CompareModel::days: return -1;
    default: return 0;
  }
}

}  // namespace

CompareModel::CompareModel(QObject* parent) : QAbstractTableModel(parent) {}

void CompareModel::set_plans(const QStringList& labels, std::vector<Candidate> plans, double tokens, int layers) {
  Q_ASSERT(labels.size() == static_cast<qsizetype>(plans.size()));
  beginResetModel();
  labels_ = labels;
  plans_ = std::move(plans);
  tokens_ = tokens;
  layers_ = layers;
  endResetModel();
}

int CompareModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : row_count; }

int CompareModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(plans_.size());
}

QVariant CompareModel::value(int row, const Candidate& c) const {
  const auto& t = c.time();
  const auto& m = c.prediction.memory;
  switch (row) {
    case gpus: return c.plan.gpus();
    case gpu_memory: return m.gpu_total_bytes;
    case host_memory: return m.host_bytes_per_node;
    case nvme: return m.nvme_bytes_per_node;
    case throughput: return t.tokens_per_s;
    case tflops: return t.model_tflops_per_gpu;
    case mfu: return t.mfu;
    case hfu: return t.hfu;
    case iteration: return t.iteration_s;
    case days: return days_to_train(tokens_, t.tokens_per_s);
    default: return {};
  }
}

QVariant CompareModel::text(int row, const Candidate& c) const {
  const Plan& p = c.plan;
  const auto& t = c.time();
  const auto& m = c.prediction.memory;
  switch (row) {
    case layout: return layout_label(p, layers_);
    case gpus: return p.gpus();
    case zero: return zero_label(p);
    case offload: return offload_label(p);
    case batching: return batching_label(p);
    case recompute: return recompute_label(p);
    case attention: return attention_label(p);
    case schedule: return schedule_label(p);
    case precision: return precision_label(p);
    case gpu_memory: return QStringLiteral("%1 of %2").arg(format_bytes(m.gpu_total_bytes), format_bytes(m.gpu_capacity_bytes));
    case host_memory: return m.host_bytes_per_node > 0 ? format_bytes(m.host_bytes_per_node) : QStringLiteral("—");
    case nvme: return m.nvme_bytes_per_node > 0 ? format_bytes(m.nvme_bytes_per_node) : QStringLiteral("—");
    case throughput: return format_tokens_per_s(t.tokens_per_s);
    case tflops: return format_tflops(t.model_tflops_per_gpu);
    case mfu: return format_percent(t.mfu);
    case hfu: return format_percent(t.hfu);
    case iteration: return format_duration(t.iteration_s);
    case days: return format_days(days_to_train(tokens_, t.tokens_per_s));
    default: return {};
  }
}

bool CompareModel::is_best(int row, int column) const {
  const int dir = better(row);
  if (dir == 0 || plans_.size() < 2) return false;
  const double mine = value(row, plans_[static_cast<std::size_t>(column)]).toDouble();
  for (const auto& other : plans_) {
    const double v = value(row, other).toDouble();
    if (dir > 0 ? v > mine : v < mine) return false;
  }
  return true;
}

QVariant CompareModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const Candidate& c = plans_[static_cast<std::size_t>(index.column())];
  switch (role) {
    case Qt::DisplayRole: return text(index.row(), c);
    case SortRole: return value(index.row(), c);
    case BestRole: return is_best(index.row(), index.column());
    case Qt::FontRole: {
      if (!is_best(index.row(), index.column())) return {};
      QFont f;
      f.setBold(true);
      return f;
    }
    case Qt::ToolTipRole: return QString::fromStdString(c.plan.summary());
    default: return {};
  }
}

QVariant CompareModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole) return {};
  if (orientation == Qt::Horizontal)
    return section >= 0 && section < labels_.size() ? QVariant(labels_[section]) : QVariant();
  static const char* const kRows[row_count] = {
      "Layout", "GPUs", "ZeRO", "Offload", "Micro-batch × GAS", "Recompute", "Attention", "Schedule", "Precision",
      "GPU memory",
      "Host memory / node", "NVMe / node", "Throughput", "TFLOP/s per GPU", "MFU", "HFU", "Iteration", "Days to train"};
  return section >= 0 && section < row_count ? QVariant(QString::fromUtf8(kRows[section])) : QVariant();
}

}  // namespace ztune::gui
