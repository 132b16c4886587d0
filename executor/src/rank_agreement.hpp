#pragma once
// How the ranks of one ztune-worker job agree before they train (private to
// the worker): an error any rank meets is said once, by rank 0, and every
// rank stops; and every rank checks it was started with the same job. Ranks
// on several hosts each read their own copy of the plan file, the token file
// and the flags (mpirun --host, srun): a copy that differs would deadlock in
// a collective (another --steps, another plan) or train on mixed settings
// with exit 0 (another --seed, another --data).
#include <optional>
#include <string>
#include <vector>

#include "ztune/executor/communicator.hpp"

namespace ztune::executor {

/// True when any rank has an error; the lowest such rank's message is printed
/// by rank 0 ("rank N: " before another rank's). Every rank must call it.
bool any_error(Communicator& world, const std::optional<std::string>& error);

/// One thing every rank must have the same of: `compared` is what must agree
/// (a digest, a value), `shown` what the message prints for it (empty: `compared`).
struct LaunchField {
  std::string what;  // "--steps", "the plan file"
  std::string compared;
  std::string shown = {};
  [[nodiscard]] const std::string& text() const { return shown.empty() ? compared : shown; }
};

/// nullopt when every rank has the same `compared` for every field; else, on
/// every rank, the first field that differs, named with rank 0's value and
/// the first rank's that differs from it (the message rank 0 prints through
/// any_error). Every rank must call it with the same fields in the same order.
std::optional<std::string> launch_mismatch(Communicator& world, const std::vector<LaunchField>& fields);

}  // namespace ztune::executor
