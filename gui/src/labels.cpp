#include "ztune/gui/labels.hpp"

#include <algorithm>
#include <string_view>
#include <vector>
#include <utility>

#include <QStringList>

#include "ztune/model/prediction.hpp"
#include "ztune/vocab/text.hpp"

namespace ztune::gui {
namespace {

using Entry = std::pair<std::string_view, const char*>;

// Keyed by the cost model's stable names (prediction.hpp), so the labels never
// depend on the enums' numeric order.
constexpr Entry kMemLabels[] = {
    {"params", "Parameters"},         {"grads", "Gradients"},
    {"optimizer", "Optimizer states"}, {"activations", "Activations"},
    {"comm_buckets", "Comm. buckets"}, {"zero3_gathered", "ZeRO-3 gathered"},
    {"workspace", "Workspace"},       {"logits", "Logits and loss"},
    {"runtime", "CUDA runtime"}, {"fragmentation", "Fragmentation"},
};

constexpr Entry kTimeLabels[] = {
    {"forward", "Forward"},
    {"backward", "Backward"},
    {"recompute", "Recompute"},
    {"optimizer", "Optimizer step"},
    {"tp_comm", "TP communication"},
    {"pp_comm", "PP send/recv"},
    {"cp_comm", "CP ring exchange"},
    {"ulysses_comm", "Ulysses all-to-all"},
    {"dp_comm", "DP communication"},
    {"zero3_gather", "ZeRO-3 gathers"},
    {"bubble", "Pipeline bubble"},
    {"offload_stall", "Offload stall"},
    {"overhead", "Framework overhead"},
};

template <std::size_t N>
QString lookup(const Entry (&table)[N], std::string_view key) {
  for (const auto& [name, label] : table)
    if (name == key) return QString::fromUtf8(label);
  return QString::fromUtf8(key.data(), static_cast<qsizetype>(key.size()));
}

QString target(OffloadTarget t) { return t == OffloadTarget::nvme ? QStringLiteral("NVMe") : QStringLiteral("CPU"); }

}  // namespace

QString mem_line_label(std::size_t i) {
  if (i >= kMemLineNames.size()) return QStringLiteral("line %1").arg(i);
  return lookup(kMemLabels, kMemLineNames[i]);
}

QString time_part_label(std::size_t i) {
  if (i >= kTimePartNames.size()) return QStringLiteral("part %1").arg(i);
  return lookup(kTimeLabels, kTimePartNames[i]);
}

QString layout_label(const Plan& p, int layers) {
  QString s = QStringLiteral("dp%1 · tp%2").arg(p.dp).arg(p.tp);
  if (p.cp > 1) s += QStringLiteral(" · cp%1").arg(p.cp);  // context parallelism
  if (p.ulysses > 1) s += QStringLiteral(" · u%1").arg(p.ulysses);  // DeepSpeed-Ulysses
  s += QStringLiteral(" · pp%1").arg(p.pp);
  if (p.dp_shard > 0) s += QStringLiteral(" · shard%1").arg(p.dp_shard);  // hybrid sharding: ZeRO-3 in groups
  if (p.virtual_stages > 1) s += QStringLiteral(" · v%1").arg(p.virtual_stages);
  // Uneven stages and stated chunks by their range (the plan's summary lists
  // them whole): "stages 7-8", "chunks 0-1".
  auto range = [&](const char* what, const std::vector<int>& v) {
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    if (lo != v.end() && *lo != *hi) s += QStringLiteral(" · %1 %2-%3").arg(QLatin1String(what)).arg(*lo).arg(*hi);
  };
  if (p.stage_layers.empty() && layers > 0 && p.pp > 1 && p.pp <= layers) {
    // The balanced partition is uneven where pp does not divide the layers:
    // every engine's plan says so, as a stated partition does (audit50gui
    // M8: only Megatron's showed it). Its ends by stage_layer_count, the one rule.
    int lo = layers, hi = 0;
    for (int i = 0; i < p.pp; ++i) {
      const int n = stage_layer_count(p, layers, i);
      lo = std::min(lo, n);
      hi = std::max(hi, n);
    }
    if (lo != hi) s += QStringLiteral(" · stages %1-%2").arg(lo).arg(hi);
  } else {
    range("stages", p.stage_layers);
  }
  range("chunks", p.chunk_layers);
  if (p.sequence_parallel) s += p.tp_comm_overlap ? QStringLiteral(" · SP+TP overlap") : QStringLiteral(" · SP");
  if (p.partition_activations) s += QStringLiteral(" · Pa");
  if (p.cpu_checkpointing) s += QStringLiteral(" · checkpoints→CPU");
  return s;
}

QString offload_label(const Plan& p) {
  if (p.offload_optimizer != OffloadTarget::none && p.offload_optimizer == p.offload_params)
    return QStringLiteral("opt + params → ") + target(p.offload_params);
  QStringList parts;
  if (p.offload_optimizer != OffloadTarget::none)
    parts << (p.offload_params == OffloadTarget::none ? QStringLiteral("optimizer → ") : QStringLiteral("opt → ")) +
                 target(p.offload_optimizer);
  if (p.offload_params != OffloadTarget::none) parts << QStringLiteral("params → ") + target(p.offload_params);
  return parts.isEmpty() ? QStringLiteral("—") : parts.join(QStringLiteral(", "));
}

QString batching_label(const Plan& p) { return QStringLiteral("%1 × %2").arg(p.micro_batch).arg(p.grad_accum); }

QString recompute_label(const Plan& p) { return QString::fromStdString(recompute_text(p)); }

QString attention_label(const Plan& p) {
  const QString kernel =
      p.sparse_attention != SparseLayout::none
          ? QStringLiteral("sparse %1/%2").arg(QString::fromStdString(to_string(p.sparse_attention))).arg(p.sparse_block)
          : QString::fromStdString(to_string(p.attention));
  return p.bias_fusion ? kernel : kernel + QStringLiteral(" · unfused bias");  // Megatron's --no-bias-*-fusion
}

QString schedule_label(const Plan& p) {
  if (p.pp == 1) return QStringLiteral("—");
  switch (p.schedule) {
    case Schedule::gpipe: return QStringLiteral("GPipe");
    case Schedule::one_f_one_b: return QStringLiteral("1F1B");
    case Schedule::interleaved: return QStringLiteral("interleaved 1F1B");
  }
  return QString::fromStdString(to_string(p.schedule));
}

QString precision_label(const Plan& p) {
  QString training = QString::fromStdString(to_string(p.precision));
  // FP8 linear GEMMs change the time and the memory: say which scaling.
  if (p.fp8 != Fp8Recipe::none)
    training += QStringLiteral(" + FP8 (%1%2)")
                    .arg(QString::fromStdString(to_string(p.fp8)),
                         p.fp8_param_gather ? QStringLiteral(", FP8 parameters") : QString());
  if (!p.low_precision_optimizer()) return training;
  // 16-bit optimizer states change the model states' bytes: say which.
  const QString master =
      p.param_remainders ? QStringLiteral("fp32 rem.") : QString::fromStdString(to_string(p.master_dtype));
  return QStringLiteral("%1, Adam %2/%3").arg(training, master, QString::fromStdString(to_string(p.moments_dtype)));
}

QString zero_label(const Plan& p) {
  return p.zero_stage == 0 ? QStringLiteral("—") : QStringLiteral("ZeRO-%1").arg(p.zero_stage);
}

QString plan_count_text(int shown, int kept, std::int64_t feasible, bool interrupted) {
  auto n = [](double v) { return QString::fromStdString(grouped(v)); };
  // A cancelled search counted only the plans it reached: not "all" that fit.
  const QString cancelled = interrupted ? QStringLiteral(", found before the search was cancelled") : QString();
  if (feasible <= kept) {
    if (kept == 1)
      return (shown == 1 ? QStringLiteral("the only plan that fits") : QStringLiteral("0 of 1 plan that fits")) +
             cancelled;
    if (shown == kept)
      return (interrupted ? QStringLiteral("%1 plans that fit") : QStringLiteral("all %1 plans that fit")).arg(n(kept)) +
             cancelled;
    return QStringLiteral("%1 of %2 plans that fit").arg(n(shown), n(kept)) + cancelled;
  }
  return (shown == kept ? QStringLiteral("the best %1 of %2 plans that fit").arg(n(kept), n(static_cast<double>(feasible)))
                        : QStringLiteral("%1 of the best %2 of %3 plans that fit")
                              .arg(n(shown), n(kept), n(static_cast<double>(feasible)))) +
         cancelled;
}

}  // namespace ztune::gui
