#pragma once
// Where training tokens come from. Sequence j (a global index: step · global_batch
// + position in the step's batch) is T + 1 consecutive tokens: inputs are the first
// T, targets the last T. Each data-parallel rank asks only for the sequences of its
// slice of each step's batch (DataLoader in trainer.cpp), so ranks read disjoint data.
#include <cstdint>
#include <memory>
#include <string>

namespace ztune::executor {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  /// Writes T + 1 tokens of sequence `index` (any index >= 0; sources wrap around).
  virtual void sequence(std::int64_t index, int t, std::int32_t* out) const = 0;
  [[nodiscard]] virtual std::string describe() const = 0;
  /// What makes the stream the same stream for a resumed run: a synthetic
  /// source's seed, a file's token count (not its path: a moved file resumes).
  [[nodiscard]] virtual std::string identity() const = 0;
};

/// A file of little-endian uint16 tokens (data/corpus/*.bin), read a sequence
/// at a time. Sequence j starts at token (j·T) mod (count − T). Throws
/// InputError naming the file when it is missing, empty, shorter than T + 1
/// tokens, or holds ids >= vocab; sequence() throws std::runtime_error naming
/// it when it changed during the run (cut short, or an id out of the vocabulary).
std::unique_ptr<TokenSource> open_token_file(const std::string& path, int vocab, int t);

/// Deterministic synthetic stream: each sequence is an arithmetic progression
/// mod vocab with a per-sequence start and stride drawn from (seed, index), so the
/// next token is predictable from the previous two and the loss can fall.
std::unique_ptr<TokenSource> synthetic_tokens(std::uint64_t seed, int vocab);

}  // namespace ztune::executor
