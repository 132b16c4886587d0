// ztune-planner: the Qt 6 desktop planner. A thin shell: the window wires
// views to the models library (ztune_gui_models), which calls the tuner and the simulator.
//
//   ztune-planner [--cluster C] [--model M] [--screenshot FILE]
#include <QApplication>
#include <QCommandLineParser>

#include "input_panel.hpp"
#include "main_window.hpp"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("ztune-planner"));
  QApplication::setOrganizationName(QStringLiteral("ztune"));
  QApplication::setApplicationVersion(QStringLiteral("0.1.0"));

  QCommandLineParser cli;
  cli.setApplicationDescription(QStringLiteral("Plan, predict and run the training of very large models."));
  cli.addHelpOption();
  cli.addVersionOption();
  const QCommandLineOption cluster({QStringLiteral("c"), QStringLiteral("cluster")},
                                   QStringLiteral("Cluster: catalog name or file (default dgx2x16)."), QStringLiteral("C"));
  const QCommandLineOption model({QStringLiteral("m"), QStringLiteral("model")},
                                 QStringLiteral("Model: catalog name, file or Hugging Face config.json (default 100b)."),
                                 QStringLiteral("M"));
  const QCommandLineOption screenshot(
      QStringLiteral("screenshot"),
      QStringLiteral("Search, select the best plan, save the window to FILE (PNG) and exit."), QStringLiteral("FILE"));
  cli.addOptions({cluster, model, screenshot});
  cli.process(app);

  ztune::gui::MainWindow window;
  const bool shooting = cli.isSet(screenshot);
  if (!shooting) window.restore_settings();  // a screenshot must not depend on this user's last session
  ztune::gui::SearchInputs in = window.inputs().inputs();
  if (shooting) in = {};
  if (cli.isSet(cluster)) in.cluster = cli.value(cluster);
  if (cli.isSet(model)) in.model = cli.value(model);
  window.inputs().set_inputs(in);
  window.show();
  if (shooting) window.screenshot_when_ready(cli.value(screenshot), 120000);
  return QApplication::exec();
}
