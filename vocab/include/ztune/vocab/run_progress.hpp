#pragma once
// A run's progress as it goes: rank 0 of ztune-worker --progress FILE appends
// one JSON line per finished step ({"step", "loss", "time_s"}), flushed, so
// that a run stopped part-way (interrupted, failed) still says what it did;
// the run record is written only at the end. The line's writer, its reader
// and the summary a stored unfinished run keeps ("completed_steps") live here.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace ztune {

/// One step's line, newline included (a loss that is not finite, an fp16
/// step skipped for overflow, is null: JSON has no inf).
[[nodiscard]] std::string progress_line(int step, double loss, double seconds);

/// What a run that stopped part-way had done: its finished steps (a resumed
/// run's first is after its checkpoint).
struct RunProgress {
  int first_step = 0, last_step = 0;
  double median_step_s = 0;         // median_step_time of the steps, as a run record's step_time_s
  std::optional<double> last_loss;  // none when the last step's loss was not finite
};

/// The progress file's steps (a line cut short by the kill, or not a step,
/// ends the reading); nullopt when it holds none.
[[nodiscard]] std::optional<RunProgress> read_progress(const std::string& path);
/// "steps 3-51, median step 0.108 s, last loss 2.2043", for messages and history.
[[nodiscard]] std::string progress_summary(const RunProgress& p);
/// As a stored unfinished run keeps it: {"first", "last", "median_step_s", "last_loss"}.
[[nodiscard]] nlohmann::json progress_to_json(const RunProgress& p);
/// Read back leniently (a row edited by hand into other types reads as
/// nullopt, never throws: history shows the rest of the run).
[[nodiscard]] std::optional<RunProgress> progress_from_json(const nlohmann::json& j);

}  // namespace ztune
