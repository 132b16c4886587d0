// A run's progress file (vocab/run_progress.hpp): what ztune-worker --progress
// writes is what ztune run reads back for a run stopped part-way, and the
// summary a stored unfinished run keeps reads back the same.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "ztune/vocab/run_progress.hpp"

namespace fs = std::filesystem;
using namespace ztune;

TEST_CASE("a progress file reads back its steps, up to a line the kill cut short", "[vocab][progress]") {
  const fs::path file = fs::temp_directory_path() / ("ztune_progress_" + std::to_string(::getpid()) + ".jsonl");
  {
    std::ofstream out(file);
    out << progress_line(4, 2.5, 0.30) << progress_line(5, 2.25, 0.10) << progress_line(6, 2.0, 0.20)
        << progress_line(7, std::numeric_limits<double>::infinity(), 0.40)  // an fp16 step skipped: loss null
        << "{\"step\": 8, \"lo";                                            // cut short by the kill
  }
  const auto p = read_progress(file.string());
  REQUIRE(p.has_value());
  CHECK(p->first_step == 4);  // a resumed run's first step is after its checkpoint
  CHECK(p->last_step == 7);
  CHECK(p->median_step_s == Approx(0.25));  // of 0.10, 0.20, 0.30, 0.40: the two middle ones' mean
  CHECK_FALSE(p->last_loss.has_value());
  CHECK(progress_summary(*p) == "steps 4-7, median step 0.25 s");

  std::ofstream(file, std::ios::trunc) << progress_line(1, 5.5507, 0.07);
  const auto one = read_progress(file.string());
  REQUIRE(one.has_value());
  CHECK(progress_summary(*one) == "step 1, median step 0.07 s, last loss 5.5507");

  std::ofstream(file, std::ios::trunc) << "";
  CHECK_FALSE(read_progress(file.string()).has_value());
  CHECK_FALSE(read_progress((file.string() + ".absent")).has_value());
  fs::remove(file);
}

TEST_CASE("a stored run's completed steps read back, and edited ones read as none", "[vocab][progress]") {
  const RunProgress p{3, 51, 0.108, 2.2043};
  const auto back = progress_from_json(progress_to_json(p));
  REQUIRE(back.has_value());
  CHECK(back->first_step == 3);
  CHECK(back->last_step == 51);
  CHECK(back->median_step_s == 0.108);
  CHECK(back->last_loss == 2.2043);
  for (const char* edited : {R"({"first": "3", "last": 51, "median_step_s": 0.1})",
                             R"({"first": 0, "last": 5, "median_step_s": 0.1})",
                             R"({"first": 9, "last": 5, "median_step_s": 0.1})",
                             R"({"first": 1, "last": 99999999999, "median_step_s": 0.1})",
                             R"({"first": 1, "last": 5})", R"([1, 5])", "42", "null"}) {
    INFO(edited);
    CHECK_FALSE(progress_from_json(nlohmann::json::parse(edited)).has_value());
  }
}
