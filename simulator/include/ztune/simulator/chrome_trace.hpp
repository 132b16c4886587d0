#pragma once
// The timeline as Chrome trace JSON ("Trace Event Format", complete events
// "ph":"X", microseconds), which Perfetto and chrome://tracing open. One
// process per pipeline stage, one thread per resource; transfers that share
// a link run concurrently, so each link gets as many lanes (threads) as it
// needs for its events never to overlap on one lane.
//
// The document is written event by event, never held whole: a trace of
// millions of operations is as large on disk as it is, not several times that
// in memory first (a 5.3 M-operation pipeline's trace took 5.9 GB to build).
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>

#include "ztune/simulator/simulation.hpp"

namespace ztune::sim {

/// The document in pieces, in order, to `sink`.
void write_chrome_trace(const std::function<void(std::string_view)>& sink, const SimResult& r);
void write_chrome_trace(std::ostream& out, const SimResult& r);
/// Writes to `path`; throws InputError naming the path when it cannot be written.
void write_chrome_trace_file(const std::string& path, const SimResult& r);

}  // namespace ztune::sim
