#pragma once
// Sharded checkpoints: every rank writes DIR/step_NNNNNNNN/rank_NNNNN.ckpt
// (DurableFile: a temporary, fsync, rename), then rank 0 commits the step by atomically
// replacing DIR/latest. A shard starts with a header (magic "ZTCKPT01", format
// version, plan digest, world size, rank, completed steps, payload bytes) and
// ends with an FNV-1a checksum of the payload, so a shard from another plan, rank
// or a damaged file is refused with the reason.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "ztune/vocab/checkpoint_layout.hpp"

namespace ztune::executor {

// 2: the header counts payload bytes (16-bit storage writes 2-byte parameters).
// 3: the payload ends with the trainer's own state (fp16's loss scaler), after
//    the parameters and optimizer states; a version-2 shard is read as the same
//    payload without it (Trainer::restore_state says when a plan needs it).
// 4: 16-bit master weights of the parameters' own dtype are the parameters
//    (OptimizerStates::params_are_master): no copy is written; an older
//    shard's copy is read past (it equals the parameters before it).
inline constexpr std::uint32_t kCheckpointVersion = 4;
/// The first version whose optimizer states hold no copy of a master the parameters are.
inline constexpr std::uint32_t kCheckpointMasterInParams = 4;
inline constexpr std::uint32_t kCheckpointOldestVersion = 2;

struct CheckpointId {
  std::uint64_t plan_digest = 0;
  int world = 1;
  int rank = 0;
};

/// Rank 0's hold on a checkpoint directory for the run's lifetime: an
/// exclusive flock(2) on DIR/lock, which records the holder's pid. Two runs
/// given the same directory at once would write each other's steps (the
/// check for committed checkpoints runs before either commits).
class CheckpointDirLock {
 public:
  CheckpointDirLock() = default;
  ~CheckpointDirLock();
  CheckpointDirLock(const CheckpointDirLock&) = delete;
  CheckpointDirLock& operator=(const CheckpointDirLock&) = delete;
  /// Takes the lock (creating DIR); nullopt, or why not (another run holds it).
  /// Holding it, removes what a crashed run left half-written there
  /// (DurableFile's NAME.tmp.PID temporaries, in DIR and its step directories).
  [[nodiscard]] std::optional<std::string> take(const std::string& dir);

 private:
  int fd_ = -1;
};

/// Writes this rank's shard after `steps` completed steps: `payload` is what
/// the trainer keeps (Trainer::checkpoint_state). Returns an error message on failure.
std::optional<std::string> write_checkpoint_shard(const std::string& dir, int steps, const CheckpointId& id,
                                                  const std::string& payload);
/// Rank 0, with a commit: DIR/plan.json keeps the plan file that wrote the
/// checkpoints, which a refused resume names. An error message when it could not.
[[nodiscard]] std::optional<std::string> keep_plan(const std::string& dir, const std::string& plan_file_json);
/// Rank 0, after every shard is written: points DIR/latest at `steps`. An
/// error message when it could not (DIR/latest then names the step before).
[[nodiscard]] std::optional<std::string> commit_checkpoint(const std::string& dir, int steps);
/// Rank 0, after committing `latest`: removes DIR's step directories older than
/// the newest `keep` at or below `latest` (a step above it is a run's next,
/// not yet committed; latest itself is always kept). A step that cannot be
/// removed stays: pruning frees space, it never fails the run.
void prune_checkpoints(const std::string& dir, int latest, int keep);
/// Rank 0, resuming from `latest` with checkpoints still to write: removes the
/// step directories above it that lack a shard of one of the `world` ranks,
/// each a write a failed run did not finish (a full disk, a crash), which the
/// resumed run would replace at that step anyway, but only after the space
/// they hold was needed. Whole steps above latest stay.
void remove_uncommitted_steps(const std::string& dir, int latest, int world);
// The committed step count: ztune::latest_checkpoint (vocab/checkpoint_layout.hpp).
/// Rank 0, with a commit: DIR/data records the token stream's identity
/// (TokenSource::identity: the synthetic seed, or the file's token count), which
/// the shards' plan digest does not cover. An error message when it could not.
[[nodiscard]] std::optional<std::string> write_data_identity(const std::string& dir, const std::string& identity);
/// nullopt when DIR/data names the same stream (or is absent: checkpoints of
/// older builds); else why a resume would not continue the same run.
std::optional<std::string> check_data_identity(const std::string& dir, const std::string& identity);
/// A shard's payload as written, and the format version that wrote it.
struct CheckpointPayload {
  std::string bytes;
  std::uint32_t version = kCheckpointVersion;
};
/// Reads this rank's shard of `steps` (its header and checksum checked, its
/// payload the size `expected_bytes` gives for the version that wrote it); the
/// error message names the file and the reason.
std::optional<std::string> read_checkpoint_shard(const std::string& dir, int steps, const CheckpointId& id,
                                                 const std::function<std::size_t(std::uint32_t)>& expected_bytes,
                                                 CheckpointPayload& payload);

}  // namespace ztune::executor
