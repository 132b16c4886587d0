#pragma once
// The checkpoint directory's layout, read by the worker that writes it
// (executor/checkpoint.hpp: the shards' format) and by `ztune run`, which
// checks a --resume or --checkpoint-dir before any rank starts:
//   DIR/step_NNNNNNNN/rank_NNNNN.ckpt  one shard per rank and committed step
//   DIR/latest                         the committed step count (the commit)
//   DIR/plan.json                      the plan file that wrote them
//   DIR/data                           the token stream's identity
//   DIR/schedule                       "steps N": the run length the learning-rate
//                                      schedule (warm-up, cosine decay) spans
#include <optional>
#include <string>
#include <vector>

namespace ztune {

/// DIR/step_NNNNNNNN: the shards of `steps` completed steps.
[[nodiscard]] std::string checkpoint_step_dir(const std::string& dir, int steps);
/// DIR/latest, DIR/plan.json, DIR/data.
[[nodiscard]] std::string checkpoint_latest_path(const std::string& dir);
[[nodiscard]] std::string checkpoint_plan_path(const std::string& dir);
[[nodiscard]] std::string checkpoint_data_path(const std::string& dir);
[[nodiscard]] std::string checkpoint_schedule_path(const std::string& dir);
/// DIR/lock: the run writing or resuming DIR holds an exclusive flock on it
/// (the executor's CheckpointDirLock), its pid written inside.
[[nodiscard]] std::string checkpoint_lock_path(const std::string& dir);
/// Why DIR cannot be used: another run holds its lock, whose pid is read
/// from `lock_fd` (DIR/lock, open). The one wording, for the worker and the CLI.
[[nodiscard]] std::string checkpoint_dir_in_use(const std::string& dir, int lock_fd);
/// checkpoint_dir_in_use's message when a run holds DIR's lock now (probed
/// with a shared, non-blocking flock, released at once); nullopt when none
/// does or DIR has no lock file. The CLI asks before it launches a run.
[[nodiscard]] std::optional<std::string> checkpoint_dir_held(const std::string& dir);
/// The steps DIR/schedule records: nullopt when there is none (checkpoints
/// of an older build); InputError, naming the file, when it is not "steps N".
[[nodiscard]] std::optional<int> checkpoint_schedule_steps(const std::string& dir);
/// Why DIR/data is missing when it must be there (nullopt when it is there,
/// or when the checkpoints are an older build's, which wrote none): every
/// build that keeps DIR/plan.json writes DIR/data first at each commit, so
/// with the plan there the data's identity was removed, and a resume could
/// not tell another token stream from the one the checkpoints trained on.
[[nodiscard]] std::optional<std::string> missing_data_identity(const std::string& dir);
/// The step counts whose step directories DIR holds, newest first (committed
/// or not: DIR/latest says which one is).
[[nodiscard]] std::vector<int> checkpoint_steps_present(const std::string& dir);
/// The committed step count in DIR/latest (its step directory there), or an
/// error message naming the file and what was expected.
std::optional<int> latest_checkpoint(const std::string& dir, std::string& error);

}  // namespace ztune
