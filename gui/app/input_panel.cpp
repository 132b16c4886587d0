#include "input_panel.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFontMetrics>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QStyle>
#include <QToolButton>
#include <QVBoxLayout>

#include "palette.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/gui/units.hpp"
#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/flag_ranges.hpp"

namespace ztune::gui {
namespace {

QComboBox* catalog_combo(const std::string& kind) {
  auto* c = new QComboBox;
  c->setEditable(true);
  c->setInsertPolicy(QComboBox::NoInsert);
  for (const auto& n : catalog_names(kind)) c->addItem(QString::fromStdString(n));
  c->setToolTip(QStringLiteral("A catalog name or a JSON file"));
  c->setMinimumContentsLength(14);
  return c;
}

/// A field with a "…" button that fills it from a file dialog.
QWidget* with_browse(QWidget* field, QComboBox* combo, QLineEdit* line, const QString& title, const QString& filter) {
  auto* row = new QWidget;
  auto* h = new QHBoxLayout(row);
  h->setContentsMargins(0, 0, 0, 0);
  h->addWidget(field, 1);
  auto* browse = new QToolButton;
  browse->setText(QStringLiteral("…"));
  browse->setToolTip(title);
  h->addWidget(browse);
  QObject::connect(browse, &QToolButton::clicked, row, [row, combo, line, title, filter] {
    const QString f = QFileDialog::getOpenFileName(row, title, QString(), filter);
    if (f.isEmpty()) return;
    if (combo != nullptr) combo->setEditText(f);
    if (line != nullptr) line->setText(f);
  });
  return row;
}

/// A number field that passes on what is typed, negative or past its flag's
/// range, for resolve_inputs to refuse in the command line's words: a spin
/// box's range drops the keystroke that would leave it ("60" in a headroom
/// field up to 50 became 6, "-5" GPUs 5). Its range is the value type's, and 0,
/// the flag not given, shows `unset` (a spin box's special text shows at its
/// minimum only, now the type's lowest); the suffix is drawn here for the same
/// reason, so that 0 reads "the model's", not "the model's B tokens".
template <class Spin>
class FormSpin : public Spin {
 public:
  using Value = std::remove_cvref_t<decltype(std::declval<Spin>().value())>;
  FormSpin(QString unset, QString suffix, Value lowest, Value highest, Value widest)
      : unset_(std::move(unset)), suffix_(std::move(suffix)), widest_(widest) {
    this->setRange(lowest, highest);
  }

  // As wide as the unset text and `widest`, not as the type's limits: Qt sizes
  // a spin box by the texts of its range (their first 18 characters), which
  // had widened the dock past its frame. Its minimum leaves out the suffix,
  // as Qt's does.
  QSize sizeHint() const override { return narrowed(Spin::sizeHint(), true); }
  QSize minimumSizeHint() const override { return narrowed(Spin::minimumSizeHint(), false); }

 protected:
  QString textFromValue(Value v) const override {
    return v == 0 && !unset_.isEmpty() ? unset_ : Spin::textFromValue(v) + suffix_;
  }
  Value valueFromText(const QString& text) const override {
    return is_unset(text) ? Value{0} : Spin::valueFromText(number_part(text));
  }
  QValidator::State validate(QString& text, int& pos) const override {
    if (is_unset(text)) return QValidator::Acceptable;
    QString number = number_part(text);
    return Spin::validate(number, pos);
  }

 private:
  QString number_part(const QString& text) const {
    return !suffix_.isEmpty() && text.endsWith(suffix_) ? text.chopped(suffix_.size()) : text;
  }
  // The unset text, or a field emptied: no number is the flag not given.
  bool is_unset(const QString& text) const {
    return !unset_.isEmpty() && (text == unset_ || number_part(text).trimmed().isEmpty());
  }
  QSize narrowed(QSize size, bool with_suffix) const {
    const QFontMetrics fm = this->fontMetrics();
    auto width = [&fm](const QString& text) { return fm.horizontalAdvance(text + QLatin1Char(' ')); };
    const int range = std::max(width(textFromValue(this->minimum()).left(18)),
                               width(textFromValue(this->maximum()).left(18)));
    const QString widest = Spin::textFromValue(widest_) + (with_suffix ? suffix_ : QString());
    const int wanted = std::max(fm.horizontalAdvance(unset_), width(widest));
    size.setWidth(size.width() - range + wanted);
    return size;
  }
  QString unset_;
  QString suffix_;
  Value widest_;  // the widest value the field is sized for
};

/// An int field (count, degree) from the type's lowest to its highest, sized for `widest`.
FormSpin<QSpinBox>* int_field(const QString& unset, int widest, const QString& suffix = {}) {
  return new FormSpin<QSpinBox>(unset, suffix, std::numeric_limits<int>::lowest(), std::numeric_limits<int>::max(),
                                widest);
}

/// A decimal field sized for `widest`; `limit` bounds it both ways where the
/// value is scaled or rounded into a narrower type (a double past 2^63 has no
/// std::int64_t).
FormSpin<QDoubleSpinBox>* number_field(const QString& unset, const QString& suffix, int decimals, double widest,
                                       double limit = std::numeric_limits<double>::max()) {
  auto* f = new FormSpin<QDoubleSpinBox>(unset, suffix, -limit, limit, widest);
  f->setDecimals(decimals);
  f->setRange(-limit, limit);  // again: setDecimals rounds the range
  return f;
}

}  // namespace

InputPanel::InputPanel(QWidget* parent) : QWidget(parent) {
  auto* outer = new QVBoxLayout(this);
  auto* form = new QFormLayout;
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  form->setRowWrapPolicy(QFormLayout::DontWrapRows);
  outer->addLayout(form);

  cluster_ = catalog_combo("clusters");
  model_ = catalog_combo("models");
  model_->setToolTip(QStringLiteral("A catalog name, a ztune model JSON or a Hugging Face config.json"));
  profile_ = new QLineEdit;
  profile_->setPlaceholderText(QStringLiteral("default for the GPU"));
  // No limits of their own: the command line's (--gpus, --global-batch, --seq,
  // --tokens) are said by resolve_inputs, and a count the fit advice names
  // (--gpus 8192000) can be typed here too.
  gpus_ = int_field(QStringLiteral("all of the cluster"), kWholeNumberFlag.hi);
  // Whole sequences up to 2^40 (kGlobalBatchFlag), beyond an int spin box.
  global_batch_ = number_field(QStringLiteral("the model's"), QStringLiteral(" sequences"), 0,
                               static_cast<double>(kGlobalBatchFlag.hi), 9.2e18);
  seq_ = int_field(QStringLiteral("the model's"), kSeqFlag.hi, QStringLiteral(" tokens"));
  // Billions: down to a million tokens, a small model's budget (--tokens takes any count).
  tokens_ = number_field(QStringLiteral("the model's"), QStringLiteral(" B tokens"), 3, kTokensFlag.hi / 1e9,
                         std::numeric_limits<double>::max() / 1e9);
  engine_ = new QComboBox;
  engine_->addItems({QStringLiteral("ztune"), QStringLiteral("deepspeed"), QStringLiteral("megatron"), QStringLiteral("fsdp")});
  attention_ = new QComboBox;
  attention_->addItems({QStringLiteral("any"), QStringLiteral("standard"), QStringLiteral("flash"), QStringLiteral("cudnn"),
                        QStringLiteral("eager")});
  attention_->setToolTip(QStringLiteral(
      "Attention kernel to search: any (standard, plus FlashAttention where the engine's kernel is priced), "
      "standard (s×s scores stored), flash, cudnn (cuDNN's fused attention) or eager (standard's memory, the "
      "softmax chain as separate kernels: Megatron --no-masked-softmax-fusion)"));
  precision_ = new QComboBox;
  precision_->addItems({QStringLiteral("any"), QStringLiteral("bf16"), QStringLiteral("fp16"), QStringLiteral("fp32")});
  precision_->setToolTip(QStringLiteral(
      "Training precision to search (--precision): any (every 16-bit type the GPU has), or one pinned"));
  optimizer_ = new QComboBox;
  for (const OptimizerChoice& c : kOptimizerChoices)
    optimizer_->addItem(QString::fromUtf8(c.label), QString::fromUtf8(c.key));
  // Its longest recipe would widen the whole form: the field shows what fits, the list all of it.
  optimizer_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  optimizer_->setMinimumContentsLength(14);
  optimizer_->setToolTip(QStringLiteral(
      "The dtypes Adam keeps its states in, in every plan (--master-dtype, --moments-dtype, --param-remainders): "
      "fp32 (ZeRO's 12 bytes a parameter); bf16 moments with fp32 masters (Megatron-Core "
      "--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16), those masters kept as the "
      "16 bits their bf16 parameters lack (its default), or bf16 masters and moments (NeMo's optim.dtype bf16). "
      "16-bit states are Megatron-Core's and NeMo's, never offloaded"));
  fp8_ = new QComboBox;
  for (const Fp8Choice& c : kFp8Choices) fp8_->addItem(QLatin1String(c.key));
  fp8_->setToolTip(QStringLiteral(
      "FP8 linear layers in every plan (--fp8): none, delayed scaling (Transformer Engine's amax history: "
      "Megatron-LM --fp8-format hybrid) or tensorwise (each tensor's own amax: torchtitan's float8); +params "
      "keeps the weights in FP8 too (--fp8-param-gather: Megatron's distributed optimizer, ZeRO-1). Needs a GPU "
      "with FP8 tensor cores and the megatron or fsdp engine; no published FP8 run is among those ztune is "
      "fitted and judged on"));
  headroom_ = number_field(QStringLiteral("none"), QStringLiteral(" % kept free"), 1, kMemoryHeadroomFlag.hi);
  headroom_->setSingleStep(1);
  headroom_->setToolTip(QStringLiteral(
      "Percent of each GPU's memory to keep free: a plan fits only below capacity × (1 − headroom) "
      "(none: the predicted runtime and fragmentation lines are the only reserve)"));
  objective_ = new QComboBox;
  objective_->addItems({QStringLiteral("throughput"), QStringLiteral("time"), QStringLiteral("cost")});
  // The cost objective's price (`ztune search --gpu-hour-price`): without one,
  // cost is ranked and shown in GPU-hours.
  price_ = number_field(QStringLiteral("none: GPU-hours"), QStringLiteral(" per GPU-hour"), 2, 1e4);  // sized for its usual prices
  price_->setToolTip(QStringLiteral("Price of one GPU-hour, for the cost objective (--gpu-hour-price)"));

  const QString json = QStringLiteral("JSON files (*.json);;All files (*)");
  add_row(form, QStringLiteral("&Cluster"), with_browse(cluster_, cluster_, nullptr, QStringLiteral("Open a cluster file"), json),
          InputField::cluster);
  fields_[InputField::cluster] = cluster_;
  add_row(form, QStringLiteral("&Model"),
          with_browse(model_, model_, nullptr, QStringLiteral("Open a model file or a Hugging Face config.json"), json),
          InputField::model);
  fields_[InputField::model] = model_;
  add_row(form, QStringLiteral("&Profile"),
          with_browse(profile_, nullptr, profile_, QStringLiteral("Open a hardware profile"), json), InputField::profile);
  fields_[InputField::profile] = profile_;
  add_row(form, QStringLiteral("&GPUs"), gpus_, InputField::gpus);
  add_row(form, QStringLiteral("Global &batch"), global_batch_, InputField::global_batch);
  add_row(form, QStringLiteral("Se&quence"), seq_, InputField::seq);
  add_row(form, QStringLiteral("&Token budget"), tokens_, InputField::tokens);
  add_row(form, QStringLiteral("&Engine"), engine_, InputField::engine);
  add_row(form, QStringLiteral("&Attention"), attention_, InputField::attention);
  add_row(form, QStringLiteral("P&recision"), precision_, InputField::precision);
  add_row(form, QStringLiteral("Optimi&zer states"), optimizer_, InputField::optimizer);
  add_row(form, QStringLiteral("FP&8 linear layers"), fp8_, InputField::fp8);
  add_row(form, QStringLiteral("Memory &headroom"), headroom_, InputField::memory_headroom);
  // The modes of long sequences and of hybrid sharding, as `ztune search` pins
  // and bounds them; what the model cannot take is said on the field.
  cp_ = int_field(QStringLiteral("any"), kCpFlag.hi);
  cp_->setToolTip(QStringLiteral(
      "Search only plans of this context-parallel degree (--cp): the sequence split over cp ranks in 2·cp "
      "load-balanced chunks, ring attention (Megatron-Core --context-parallel-size). any: every degree up to the "
      "maximum below"));
  add_row(form, QStringLiteral("Conte&xt parallel"), cp_, InputField::cp);
  max_cp_ = int_field(QStringLiteral("up to 8 from 8k tokens"), kCpFlag.hi);
  max_cp_->setToolTip(QStringLiteral(
      "Largest context-parallel degree searched (--max-cp): the sequence split over cp ranks, ring attention. "
      "1: none"));
  add_row(form, QStringLiteral("Max &context parallel"), max_cp_, InputField::max_cp);
  ulysses_ = int_field(QStringLiteral("any"), kUlyssesFlag.hi);
  ulysses_->setToolTip(QStringLiteral(
      "Search only plans of this DeepSpeed-Ulysses degree (--ulysses): the sequence split over ulysses ranks, an "
      "all-to-all over the heads around attention (Megatron-DeepSpeed --ds-sequence-parallel-size; the deepspeed "
      "and ztune engines). It divides the heads and the sequence, and does not combine with context parallelism"));
  add_row(form, QStringLiteral("&Ulysses"), ulysses_, InputField::ulysses);
  max_ulysses_ = int_field(QStringLiteral("up to 8 from 8k tokens"), kUlyssesFlag.hi);
  max_ulysses_->setToolTip(QStringLiteral(
      "Largest DeepSpeed-Ulysses degree searched (--max-ulysses; the deepspeed and ztune engines). 1: none"));
  add_row(form, QStringLiteral("Max U&lysses"), max_ulysses_, InputField::max_ulysses);
  dp_shard_ = int_field(QStringLiteral("any"), kDpShardFlag.hi, QStringLiteral(" ranks"));
  dp_shard_->setToolTip(QStringLiteral(
      "Search only hybrid-sharded ZeRO-3 plans, the states sharded within groups of this many data-parallel ranks "
      "and replicated across them (--dp-shard: FSDP HYBRID_SHARD, torchtitan data_parallel_shard_degree, "
      "DeepSpeed mics_shard_size); it divides the weights' data-parallel group (dp × cp × ulysses) in two or more. "
      "any: the search tries one node's ranks and 2, 4, 8 nodes' where dp spans nodes, beside plain ZeRO"));
  add_row(form, QStringLiteral("Hybrid &shard group"), dp_shard_, InputField::dp_shard);
  add_row(form, QStringLiteral("&Objective"), objective_, InputField::objective);
  add_row(form, QStringLiteral("GPU-hour pr&ice"), price_, InputField::gpu_hour_price);

  search_ = new QPushButton(QStringLiteral("Search"));
  search_->setDefault(true);
  search_->setToolTip(QStringLiteral("Search the plan space (Ctrl+R)"));
  search_->setMinimumHeight(32);
  outer->addWidget(search_);
  auto* other = new QLabel;
  other->setWordWrap(true);
  other->setVisible(false);
  other->setStyleSheet(QStringLiteral("color: %1;").arg(error_color().name()));
  other->setTextInteractionFlags(Qt::TextSelectableByMouse);
  errors_[InputField::other] = other;
  outer->addWidget(other);
  summary_ = new QLabel;
  summary_->setTextFormat(Qt::PlainText);  // it starts with a cluster file's name: never markup
  summary_->setWordWrap(true);
  summary_->setStyleSheet(QStringLiteral("color: #555;"));
  outer->addWidget(summary_);
  report_ = new QLabel;
  report_->setWordWrap(true);
  report_->setTextFormat(Qt::RichText);
  outer->addWidget(report_);
  outer->addStretch(1);

  connect(search_, &QPushButton::clicked, this, &InputPanel::searchRequested);

  // Validate as the user types (debounced): loading a file is milliseconds, and
  // the message is the one the search would give.
  validate_timer_.setSingleShot(true);
  validate_timer_.setInterval(400);
  connect(&validate_timer_, &QTimer::timeout, this, &InputPanel::validate_now);
  auto later = [this] {
    validate_timer_.start();
    emit inputsEdited();
  };
  connect(cluster_, &QComboBox::editTextChanged, this, later);
  connect(model_, &QComboBox::editTextChanged, this, later);
  connect(profile_, &QLineEdit::textChanged, this, later);
  connect(gpus_, &QSpinBox::valueChanged, this, later);
  connect(global_batch_, &QDoubleSpinBox::valueChanged, this, later);
  connect(seq_, &QSpinBox::valueChanged, this, later);
  connect(engine_, &QComboBox::currentTextChanged, this, later);
  connect(attention_, &QComboBox::currentTextChanged, this, later);
  connect(precision_, &QComboBox::currentTextChanged, this, later);
  connect(optimizer_, &QComboBox::currentIndexChanged, this, later);
  connect(fp8_, &QComboBox::currentTextChanged, this, later);
  for (QSpinBox* mode : {cp_, max_cp_, ulysses_, max_ulysses_, dp_shard_})
    connect(mode, &QSpinBox::valueChanged, this, later);
  connect(headroom_, &QDoubleSpinBox::valueChanged, this, later);
  // The objective ranks and the token budget sets the days: results searched
  // for other ones are stale too (they had stayed unmarked).
  connect(tokens_, &QDoubleSpinBox::valueChanged, this, later);
  connect(objective_, &QComboBox::currentTextChanged, this, later);
  connect(price_, &QDoubleSpinBox::valueChanged, this, later);
}

void InputPanel::add_row(QFormLayout* form, const QString& label, QWidget* field, InputField which) {
  // Fields shrink with the dock: a spin box's sizeHint (its longest special
  // text, "none: GPU-hours") and a combo's longest item had set the panel's
  // minimum wider than a 1600-pixel window's dock, which then scrolled
  // sideways and hid the reports' line ends under its vertical scroll bar.
  QList<QWidget*> parts = field->findChildren<QWidget*>();
  parts.push_back(field);
  for (QWidget* w : parts) {
    if (auto* spin = qobject_cast<QAbstractSpinBox*>(w))
      spin->setSizePolicy(QSizePolicy::Preferred, spin->sizePolicy().verticalPolicy());
    auto* combo = qobject_cast<QComboBox*>(w);
    if (combo && combo->sizeAdjustPolicy() != QComboBox::AdjustToMinimumContentsLengthWithIcon) {
      combo->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
      combo->setMinimumContentsLength(10);
    }
  }
  auto* box = new QWidget;
  auto* v = new QVBoxLayout(box);
  v->setContentsMargins(0, 0, 0, 0);
  v->setSpacing(2);
  v->addWidget(field);
  auto* err = new QLabel;
  err->setWordWrap(true);
  err->setVisible(false);
  err->setTextInteractionFlags(Qt::TextSelectableByMouse);
  err->setStyleSheet(QStringLiteral("color: %1; font-size: 90%;").arg(error_color().name()));
  v->addWidget(err);
  form->addRow(label, box);
  errors_[which] = err;
  if (!fields_.count(which)) fields_[which] = field;
}

SearchInputs InputPanel::inputs() const {
  SearchInputs in;
  in.cluster = cluster_->currentText();
  in.model = model_->currentText();
  in.profile = profile_->text();
  in.gpus = gpus_->value();
  in.global_batch = std::llround(global_batch_->value());
  in.seq = seq_->value();
  in.tokens = tokens_->value() * 1e9;
  in.engine = engine_->currentText();
  in.attention = attention_->currentText();
  in.precision = precision_->currentText();
  in.optimizer = optimizer_->currentData().toString();
  in.fp8 = fp8_->currentText();
  in.memory_headroom_pct = headroom_->value();
  in.cp = cp_->value();
  in.max_cp = max_cp_->value();
  in.ulysses = ulysses_->value();
  in.max_ulysses = max_ulysses_->value();
  in.dp_shard = dp_shard_->value();
  in.objective = objective_->currentText();
  in.gpu_hour_price = price_->value();
  return in;
}

void InputPanel::set_inputs(const SearchInputs& in) {
  cluster_->setEditText(in.cluster);
  model_->setEditText(in.model);
  profile_->setText(in.profile);
  gpus_->setValue(in.gpus);
  global_batch_->setValue(static_cast<double>(in.global_batch));
  seq_->setValue(in.seq);
  tokens_->setValue(in.tokens / 1e9);
  engine_->setCurrentText(in.engine);
  attention_->setCurrentText(in.attention);
  precision_->setCurrentText(in.precision);
  // An unknown key (a setting from another version) shows fp32 and leaves the issue to resolve_inputs.
  optimizer_->setCurrentIndex(std::max(0, optimizer_->findData(in.optimizer)));
  // An unknown saved recipe (another version's) shows none rather than the last choice.
  fp8_->setCurrentIndex(std::max(0, fp8_->findText(in.fp8)));
  headroom_->setValue(in.memory_headroom_pct);
  cp_->setValue(in.cp);
  max_cp_->setValue(in.max_cp);
  ulysses_->setValue(in.ulysses);
  max_ulysses_->setValue(in.max_ulysses);
  dp_shard_->setValue(in.dp_shard);
  objective_->setCurrentText(in.objective);
  price_->setValue(in.gpu_hour_price);
}

void InputPanel::clear_issues() {
  for (auto& [field, label] : errors_) {
    label->clear();
    label->setVisible(false);
  }
  for (auto& [field, widget] : fields_) widget->setStyleSheet(QString());
  summary_->setVisible(true);
}

void InputPanel::show_issues(const QList<InputIssue>& issues) {
  clear_issues();
  for (const auto& i : issues) {
    QLabel* label = errors_.count(i.field) ? errors_[i.field] : errors_[InputField::other];
    label->setText(label->text().isEmpty() ? i.message : label->text() + QLatin1Char('\n') + i.message);
    label->setVisible(true);
    if (fields_.count(i.field))
      fields_[i.field]->setStyleSheet(QStringLiteral("border: 1px solid %1;").arg(error_color().name()));
    // The summary describes the last cluster and model that loaded: beside a
    // cluster, model or sequence in error it would describe other inputs
    // (audit50gui L6).
    if (i.field == InputField::cluster || i.field == InputField::model || i.field == InputField::seq)
      summary_->setVisible(false);
  }
}

void InputPanel::set_summary(const QString& text) { summary_->setText(text); }

void InputPanel::set_search_report(const QString& html) { report_->setText(html); }

void InputPanel::validate_now() {
  const InputResolution r = resolve_inputs(inputs());
  if (!r.ok()) {
    show_issues(QList<InputIssue>(r.issues.begin(), r.issues.end()));
    return;
  }
  clear_issues();
  const auto& c = r.inputs->cluster;
  const auto& m = r.inputs->model;
  // A Llama-style model file without "dropout" reads as GPT-2's 0.1, as
  // predict and search say (dropout_note).
  const std::string dropout = dropout_note(m, c, r.inputs->profile);
  set_summary(QStringLiteral("%1: %2 × %3 GPUs (%4, %5)\n%6: %7 parameters, %8 layers, sequence %9")
                  .arg(QString::fromStdString(c.name))
                  .arg(c.nodes)
                  .arg(c.node.gpus)
                  .arg(QString::fromStdString(c.node.gpu.name), format_bytes(c.node.gpu.memory_bytes()))
                  .arg(QString::fromStdString(m.name), format_count(m.total_params()))
                  .arg(m.layers)
                  .arg(m.seq_len) +
              // A Hugging Face config names no training length: its maximum
              // positions are used, as `ztune search` notes (--seq sets it).
              (m.seq_len_is_position_limit
                   ? QStringLiteral(" (the config's maximum positions, not a training length: Sequence sets it)")
                   : QString()) +
              (dropout.empty() ? QString() : QStringLiteral("\n") + QString::fromStdString(dropout)));
}

}  // namespace ztune::gui
