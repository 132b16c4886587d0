// The input form's fields pass on what is typed: a number past its flag's
// range, or negative, reaches resolve_inputs and is refused there in the
// command line's words, never turned into another number by the field (a spin
// box drops the keystroke that would leave its range: "60" in a headroom field
// up to 50 had become 6). The mode fields round-trip through the form.
#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <QAbstractSpinBox>
#include <QFormLayout>
#include <QLabel>
#include <QTemporaryDir>
#include <QTest>

#include "input_panel.hpp"

using namespace ztune::gui;

namespace {

// The field of the row labelled `label` (its mnemonic's & included).
QAbstractSpinBox* field(InputPanel& panel, const QString& label) {
  for (QLabel* l : panel.findChildren<QLabel*>()) {
    if (l->text() != label || l->buddy() == nullptr) continue;
    auto* spin = qobject_cast<QAbstractSpinBox*>(l->buddy());
    return spin != nullptr ? spin : l->buddy()->findChild<QAbstractSpinBox*>();
  }
  FAIL("no row labelled " << label.toStdString());
  return nullptr;
}

// Types `text` over the field's contents, as a user selecting it and typing.
void type(QAbstractSpinBox* f, const QString& text) {
  f->setFocus();
  f->selectAll();
  QTest::keyClicks(f, text);
}

}  // namespace

TEST_CASE("typed numbers past their range reach the inputs unchanged", "[gui][panel]") {
  InputPanel panel;
  struct Typed {
    const char* label;
    const char* text;
    std::function<double(const SearchInputs&)> read;
    double expected;
    InputField field;
  };
  const std::vector<Typed> cases = {
      {"Memory &headroom", "60", [](const SearchInputs& in) { return in.memory_headroom_pct; }, 60,
       InputField::memory_headroom},
      {"&GPUs", "-5", [](const SearchInputs& in) { return in.gpus; }, -5, InputField::gpus},
      {"Se&quence", "99999999", [](const SearchInputs& in) { return in.seq; }, 99999999, InputField::seq},
      {"Global &batch", "-1", [](const SearchInputs& in) { return static_cast<double>(in.global_batch); }, -1,
       InputField::global_batch},
      {"Global &batch", "2000000000000", [](const SearchInputs& in) { return static_cast<double>(in.global_batch); },
       2e12, InputField::global_batch},
      {"&Token budget", "2000000000", [](const SearchInputs& in) { return in.tokens; }, 2e18, InputField::tokens},
      {"GPU-hour pr&ice", "-1", [](const SearchInputs& in) { return in.gpu_hour_price; }, -1,
       InputField::gpu_hour_price},
      {"Max &context parallel", "99999999", [](const SearchInputs& in) { return in.max_cp; }, 99999999,
       InputField::max_cp},
      {"Conte&xt parallel", "-2", [](const SearchInputs& in) { return in.cp; }, -2, InputField::cp},
      {"&Ulysses", "-4", [](const SearchInputs& in) { return in.ulysses; }, -4, InputField::ulysses},
      {"Max U&lysses", "-1", [](const SearchInputs& in) { return in.max_ulysses; }, -1, InputField::max_ulysses},
      {"Hybrid &shard group", "-8", [](const SearchInputs& in) { return in.dp_shard; }, -8, InputField::dp_shard},
  };
  for (const Typed& t : cases) {
    INFO(t.label << " typed " << t.text);
    panel.set_inputs({});
    type(field(panel, QString::fromUtf8(t.label)), QString::fromUtf8(t.text));
    const SearchInputs in = panel.inputs();
    CHECK(t.read(in) == Approx(t.expected));
    // resolve_inputs refuses it on that field (the message's words: test_search_inputs.cpp).
    const InputResolution r = resolve_inputs(in);
    CHECK_FALSE(r.ok());
    bool on_field = false;
    for (const auto& i : r.issues) on_field |= i.field == t.field;
    CHECK(on_field);
  }
}

TEST_CASE("a field's unset value reads as such, and the mode fields round-trip", "[gui][panel][modes]") {
  InputPanel panel;
  panel.show();  // a spin box writes its text once shown
  REQUIRE(QTest::qWaitForWindowExposed(&panel));
  panel.set_inputs({});
  CHECK(panel.inputs() == SearchInputs{});
  CHECK(field(panel, QStringLiteral("&GPUs"))->text() == QStringLiteral("all of the cluster"));
  CHECK(field(panel, QStringLiteral("&Token budget"))->text() == QStringLiteral("the model's"));
  CHECK(field(panel, QStringLiteral("Conte&xt parallel"))->text() == QStringLiteral("any"));
  SearchInputs in;
  in.cp = 2;
  in.max_cp = 4;
  in.ulysses = 8;
  in.max_ulysses = 2;
  in.dp_shard = 16;
  in.memory_headroom_pct = 12.5;
  in.tokens = 3e11;
  panel.set_inputs(in);
  CHECK(panel.inputs() == in);
  CHECK(field(panel, QStringLiteral("Hybrid &shard group"))->text() == QStringLiteral("16 ranks"));
  // Typing over an unset field: the number, its suffix drawn after it once entered.
  panel.set_inputs({});
  QAbstractSpinBox* seq = field(panel, QStringLiteral("Se&quence"));
  type(seq, QStringLiteral("4096"));
  QTest::keyClick(seq, Qt::Key_Return);
  CHECK(panel.inputs().seq == 4096);
  CHECK(seq->text() == QStringLiteral("4096 tokens"));
  // Typed over, the suffix kept: the number before it is read.
  seq->setFocus();
  QTest::keyClick(seq, Qt::Key_Home);
  QTest::keyClick(seq, Qt::Key_Delete);
  CHECK(panel.inputs().seq == 96);
  // Cleared: the flag not given.
  seq->selectAll();
  QTest::keyClick(seq, Qt::Key_Delete);
  QTest::keyClick(seq, Qt::Key_Return);
  CHECK(panel.inputs().seq == 0);
}

TEST_CASE("an issue on a mode field is shown under that field", "[gui][panel][modes]") {
  InputPanel panel;
  const QString message = QStringLiteral("--dp-shard: expected a shard group of 2 or more data-parallel ranks, got 1");
  panel.show_issues({InputIssue{InputField::dp_shard, message}});
  QWidget* row = field(panel, QStringLiteral("Hybrid &shard group"))->parentWidget();
  bool shown = false;
  for (QLabel* l : row->findChildren<QLabel*>()) shown |= l->text() == message && !l->isHidden();
  CHECK(shown);
}

TEST_CASE("the summary hides beside a cluster, model or sequence in error", "[gui][panel]") {
  // It describes the last cluster and model that loaded: beside a cluster in
  // error it had described another one (audit50gui L6).
  InputPanel panel;
  const QString text = QStringLiteral("dgx2x16: 16 × 16 GPUs");
  panel.set_summary(text);
  QLabel* summary = nullptr;
  for (QLabel* l : panel.findChildren<QLabel*>())
    if (l->text() == text) summary = l;
  REQUIRE(summary != nullptr);
  panel.show_issues({InputIssue{InputField::memory_headroom, QStringLiteral("--memory-headroom: expected ...")}});
  CHECK_FALSE(summary->isHidden());  // the same cluster and model
  panel.show_issues({InputIssue{InputField::cluster, QStringLiteral("--cluster nope: not a file")}});
  CHECK(summary->isHidden());
  panel.clear_issues();
  CHECK_FALSE(summary->isHidden());
}

TEST_CASE("the summary says when a SwiGLU model is priced with dropout, as predict and search do",
          "[gui][panel][dropout]") {
  // The catalog's Llama 7B states "dropout": 0; the same file without the key
  // reads as GPT-2's 0.1, its masks and kernels priced by an engine that runs
  // them (not ztune's executor, which has no dropout).
  QTemporaryDir dir;
  nlohmann::json m = nlohmann::json::parse(std::ifstream(std::string(ZTUNE_TEST_DATA_DIR) + "/models/llama-7b.json"));
  m.erase("dropout");
  const QString file = dir.filePath("no-dropout.json");
  std::ofstream(file.toStdString()) << m.dump();
  const auto summary_says = [](InputPanel& panel, const QString& what) {
    for (int waited = 0; waited < 5000; waited += 50) {
      for (QLabel* l : panel.findChildren<QLabel*>())
        if (l->text().contains(QStringLiteral("sequence")) && !l->isHidden())
          return l->text().contains(what);
      QTest::qWait(50);
    }
    FAIL("no summary shown");
    return false;
  };
  InputPanel panel;
  SearchInputs in = panel.inputs();
  in.cluster = QStringLiteral("dgx-a100-80gb");
  in.engine = QStringLiteral("fsdp");
  in.model = file;
  panel.set_inputs(in);
  CHECK(summary_says(panel, QStringLiteral("dropout 0.1 priced")));
  InputPanel stated;
  in.model = QStringLiteral("llama-7b");
  stated.set_inputs(in);
  CHECK_FALSE(summary_says(stated, QStringLiteral("dropout")));
  InputPanel executor;
  in.model = file;
  in.engine = QStringLiteral("ztune");
  executor.set_inputs(in);
  CHECK_FALSE(summary_says(executor, QStringLiteral("dropout")));
}
