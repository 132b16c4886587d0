// ztune-planner: the Qt 6 desktop planner. A thin shell: the window wires
// views to the models library (ztune_gui_models), which calls the tuner and the simulator.
//
//   ztune-planner [--cluster C] [--model M] [--db PATH] [--screenshot FILE | --screenshot-set DIR]
#include <QApplication>
#include <QCommandLineParser>
#include <QCoreApplication>
#include <QTemporaryDir>

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "input_panel.hpp"
#include "main_window.hpp"
#include "ztune/vocab/durable_file.hpp"

namespace {

struct Options {
  QCommandLineOption cluster{{QStringLiteral("c"), QStringLiteral("cluster")},
                             QStringLiteral("Cluster: catalog name or file (default dgx2x16)."), QStringLiteral("C")};
  QCommandLineOption model{{QStringLiteral("m"), QStringLiteral("model")},
                           QStringLiteral("Model: catalog name, file or Hugging Face config.json (default 100b)."),
                           QStringLiteral("M")};
  QCommandLineOption db{QStringLiteral("db"),
                        QStringLiteral("Results database the planner stores searches and runs in and lists in History "
                                       "(default: ztune's, as `ztune --db` defaults; with --screenshot or "
                                       "--screenshot-set, a temporary one of their own)."),
                        QStringLiteral("PATH")};
  QCommandLineOption screenshot{
      QStringLiteral("screenshot"),
      QStringLiteral("Search, select the best plan, save the window to FILE (PNG; JPEG for a .jpg) and exit."),
      QStringLiteral("FILE")};
  QCommandLineOption screenshot_set{
      QStringLiteral("screenshot-set"),
      QStringLiteral("Search, then save each view into DIR (search, compare, stale inputs, a 64-micro-batch "
                     "interleaved timeline, history; on a CPU cluster a run) and exit."),
      QStringLiteral("DIR")};
};

void describe(QCommandLineParser& cli, const Options& o) {
  cli.setApplicationDescription(QStringLiteral("Plan, predict and run the training of very large models."));
  cli.addHelpOption();
  cli.addVersionOption();
  cli.addOptions({o.cluster, o.model, o.db, o.screenshot, o.screenshot_set});
}

void name_application() {
  QCoreApplication::setApplicationName(QStringLiteral("ztune-planner"));
  QCoreApplication::setOrganizationName(QStringLiteral("ztune"));
  QCoreApplication::setApplicationVersion(QStringLiteral("0.1.0"));
}

bool asks_for_text_only(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "-h" || a == "--help" || a == "--help-all" || a == "-v" || a == "--version" || a == "-?") return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  ztune::report_file_size_limit_as_error();
  const Options o;
  // --help and --version need no display: answer them before QApplication,
  // which aborts (rc 134) when it cannot connect to one (issue 23).
  if (asks_for_text_only(argc, argv)) {
    QCoreApplication core(argc, argv);
    name_application();
    QCommandLineParser cli;
    describe(cli, o);
    cli.process(core);  // prints and exits
    return 0;
  }
  // No display and no platform chosen: say so instead of Qt's abort.
  if (std::getenv("DISPLAY") == nullptr && std::getenv("WAYLAND_DISPLAY") == nullptr &&
      std::getenv("QT_QPA_PLATFORM") == nullptr) {
    std::fprintf(stderr,
                 "ztune-planner: error: no display (DISPLAY and WAYLAND_DISPLAY are unset); run it under X or "
                 "Wayland, or headless with QT_QPA_PLATFORM=offscreen (e.g. with --screenshot FILE)\n");
    return 2;
  }
  QApplication app(argc, argv);
  name_application();
  QCommandLineParser cli;
  describe(cli, o);
  cli.process(app);
  const auto& cluster = o.cluster;
  const auto& model = o.model;
  const auto& screenshot = o.screenshot;

  ztune::gui::MainWindow window;
  const bool shooting = cli.isSet(screenshot) || cli.isSet(o.screenshot_set);
  // Screenshots neither read nor add to this user's history: without --db
  // their searches and runs go to a database of their own, removed at exit
  // (the tour's history view then shows what the tour did).
  QTemporaryDir shot_db;
  if (cli.isSet(o.db)) {
    window.document().set_database(cli.value(o.db));
  } else if (shooting) {
    if (!shot_db.isValid()) {
      std::fprintf(stderr,
                   "ztune-planner: error: cannot create a temporary directory for the screenshots' database: %s\n",
                   qPrintable(shot_db.errorString()));
      return 2;
    }
    window.document().set_database(shot_db.filePath(QStringLiteral("results.db")));
  }
  if (!shooting) window.restore_settings();  // a screenshot must not depend on this user's last session
  ztune::gui::SearchInputs in = window.inputs().inputs();
  if (shooting) in = {};
  if (cli.isSet(cluster)) in.cluster = cli.value(cluster);
  if (cli.isSet(model)) in.model = cli.value(model);
  window.inputs().set_inputs(in);
  window.show();
  if (cli.isSet(o.screenshot_set)) {
    window.screenshot_tour(cli.value(o.screenshot_set), 300000);
  } else if (shooting) {
    window.screenshot_when_ready(cli.value(screenshot), 120000);
  }
  return QApplication::exec();
}
