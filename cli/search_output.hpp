#pragma once
// How `ztune search` prints a search: the ranked table, the best plan's memory
// and time breakdowns, the pass summary, the rule counts (--explain) and, when
// nothing fits, the closest plans and what would make one fit.
#include <iosfwd>
#include <string>
#include <vector>

#include "ztune/tuner/explain.hpp"
#include "ztune/tuner/search.hpp"

namespace ztune::cli {

/// The table of `plans` (rank, layout, ZeRO, offload, mb×accum, recompute, schedule,
/// memory, TFLOP/s/GPU, MFU, tokens/s, days).
/// "note: …" (one line, no newline) when the model's sequence is an imported
/// config's position limit rather than a chosen length; empty otherwise.
std::string sequence_note(const Transformer& m);

void print_plan_table(std::ostream& os, const SearchResult& r, const std::vector<Candidate>& plans);
/// Memory lines (GB and share of the total) and time parts (s and share) of one plan.
void print_breakdowns(std::ostream& os, const Candidate& c);
/// "searched N plans ... in t s on T threads" plus one line per pass.
void print_pass_summary(std::ostream& os, const SearchResult& r);
/// Plans removed by each rule, with their share of the space.
void print_rule_counts(std::ostream& os, const SearchResult& r);
/// The closest plans and the hints.
void print_infeasible(std::ostream& os, const SearchResult& r, const std::vector<FitHint>& hints);
/// "note: the best plan needs 99.1 % of ...; with --memory-headroom 5 ...": a
/// tight best plan's margin and what keeping one costs (tight_memory_alternative).
void print_tight_memory(std::ostream& os, const HeadroomAlternative& t);

}  // namespace ztune::cli
