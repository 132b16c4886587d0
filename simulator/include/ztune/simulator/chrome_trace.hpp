#pragma once
// The timeline as Chrome trace JSON ("Trace Event Format", complete events
// "ph":"X", microseconds), which Perfetto and chrome://tracing open. One
// process per pipeline stage, one thread per resource; transfers that share
// a link run concurrently, so each link gets as many lanes (threads) as it
// needs for its events never to overlap on one lane.
#include <iosfwd>
#include <string>

#include "ztune/simulator/simulation.hpp"

namespace ztune::sim {

void write_chrome_trace(std::ostream& out, const SimResult& r);
/// Writes to `path`; throws InputError naming the path when it cannot be written.
void write_chrome_trace_file(const std::string& path, const SimResult& r);

}  // namespace ztune::sim
