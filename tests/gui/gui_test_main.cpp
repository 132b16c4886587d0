// Catch2 main for the planner's headless tests (STYLE.md #19, hotspot's
// tests/testutils.h): the offscreen platform unless a platform is already set,
// a fixed font DPI so sizes do not depend on the machine, and a QApplication
// alive for every test (queued signals need its event loop).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <QApplication>

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  qputenv("QT_FONT_DPI", "96");
  qputenv("QT_ENABLE_HIGHDPI_SCALING", "0");
  // Searches store their results: keep the tests' away from the user's database.
  if (qEnvironmentVariableIsEmpty("ZTUNE_GUI_TEST_KEEP_XDG")) qputenv("XDG_DATA_HOME", QByteArray(ZTUNE_GUI_TEST_TMP));
  int qt_argc = 1;
  QApplication app(qt_argc, argv);
  return Catch::Session().run(argc, argv);
}
