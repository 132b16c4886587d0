#include "ztune/simulator/chrome_trace.hpp"

#include <algorithm>
#include <map>
#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "ztune/vocab/durable_file.hpp"
#include "ztune/vocab/input_error.hpp"

namespace ztune::sim {
namespace {

constexpr int kLanesPerResource = 64;  // thread id = resource kind · 64 + lane

}  // namespace

void write_chrome_trace(const std::function<void(std::string_view)>& sink, const SimResult& r) {
  const OpGraph& g = r.graph;
  const Timeline& t = r.timeline;
  // Ops in start order, so lanes are assigned greedily (interval partitioning).
  std::vector<OpId> order(g.size());
  for (OpId v = 0; v < g.size(); ++v) order[v] = v;
  std::stable_sort(order.begin(), order.end(), [&](OpId a, OpId b) { return t.start_s[a] < t.start_s[b]; });
  std::vector<std::vector<double>> lane_free(g.resources.size());  // per resource: end of each lane's last op
  std::map<std::pair<int, int>, std::string> threads;              // (pid, tid) → name

  // The keys in nlohmann's (sorted) order, as one document's dump() wrote them.
  const nlohmann::json other{{"iteration_s", r.iteration_s}, {"generator", "ztune simulator"}};
  sink(R"({"displayTimeUnit":"ms","otherData":)" + other.dump() + R"(,"traceEvents":[)");
  bool first = true;
  auto event = [&](const nlohmann::json& e) {
    sink(first ? e.dump() : "," + e.dump());
    first = false;
  };
  for (const OpId v : order) {
    const Op& op = g.ops[v];
    const Resource& res = g.resources[static_cast<std::size_t>(op.resource)];
    auto& lanes = lane_free[static_cast<std::size_t>(op.resource)];
    std::size_t lane = 0;
    while (lane < lanes.size() && lanes[lane] > t.start_s[v]) ++lane;
    if (lane == lanes.size()) lanes.push_back(0);
    lanes[lane] = t.end_s[v];
    const int tid = static_cast<int>(res.kind) * kLanesPerResource +
                    static_cast<int>(std::min<std::size_t>(lane, kLanesPerResource - 1));
    std::string thread = to_string(res.kind);
    if (lane > 0) thread += " #" + std::to_string(lane + 1);
    threads.emplace(std::make_pair(res.stage, tid), std::move(thread));
    nlohmann::json args{{"resource", resource_name(res)}, {"kind", to_string(op.kind)}};
    if (op.microbatch >= 0) args["microbatch"] = op.microbatch;
    if (op.chunk >= 0) args["chunk"] = op.chunk;
    if (op.bytes > 0) args["bytes"] = op.bytes;
    event({{"name", op_name(op)},
           {"cat", kTimePartNames[static_cast<std::size_t>(time_part_of(op.kind))]},
           {"ph", "X"},
           {"ts", t.start_s[v] * 1e6},
           {"dur", (t.end_s[v] - t.start_s[v]) * 1e6},
           {"pid", res.stage},
           {"tid", tid},
           {"args", std::move(args)}});
  }
  for (int s = 0; s < g.stages; ++s)
    event({{"name", "process_name"}, {"ph", "M"}, {"pid", s}, {"tid", 0},
           {"args", {{"name", "stage " + std::to_string(s)}}}});
  for (const auto& [key, name] : threads)
    event({{"name", "thread_name"}, {"ph", "M"}, {"pid", key.first}, {"tid", key.second}, {"args", {{"name", name}}}});
  sink("]}\n");
}

void write_chrome_trace(std::ostream& out, const SimResult& r) {
  write_chrome_trace([&](std::string_view piece) { out << piece; }, r);
}

void write_chrome_trace_file(const std::string& path, const SimResult& r) {
  DurableFile file(path);
  // Pieces gathered into writes of about 1 MiB.
  std::string buffer;
  write_chrome_trace(
      [&](std::string_view piece) {
        buffer += piece;
        if (buffer.size() >= (1U << 20)) {
          file.write(buffer);
          buffer.clear();
        }
      },
      r);
  file.write(buffer);
  if (auto why = file.commit()) throw InputError(path + ": cannot write the trace file (--trace): " + *why);
}

}  // namespace ztune::sim
