#pragma once
// The value types the worker thread hands to the UI thread: a finished search
// with the inputs it ran on, one point of the scaling curve, and one simulated
// iteration. Plain copies: the UI never shares state with a running worker.
#include <optional>

#include <QList>
#include <QMetaType>
#include <QString>

#include "ztune/gui/search_inputs.hpp"
#include "ztune/gui/timeline_data.hpp"
#include "ztune/validation/accuracy.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/tuner/explain.hpp"
#include "ztune/tuner/search.hpp"

namespace ztune::gui {

struct SearchOutcome {
  ResolvedInputs inputs;  // what was searched (options.stop is null)
  /// The form's inputs the search ran on. The document compares the
  /// form with these: a search replaced by the next one (Ctrl+R while it ran)
  /// answers its own inputs, not the next one's.
  std::optional<SearchInputs> asked;
  /// Reopened from the results database: `asked` is then the form that asks
  /// the same search, where the form can say it (stored_search.cpp), and the
  /// window fills the form with it.
  bool reopened = false;
  SearchResult result;
  std::int64_t db_id = 0;  // id in the results database; 0 when it was not stored
  QString db_note;         // why it was not stored, when it was not
  /// The results database is still being written: the search is shown
  /// first, since storing waits up to 30 s for another writer's lock
  /// (PlannerDocument::searchStored sets db_id and db_note when it is done).
  bool storing = false;
  std::vector<FitHint> fit_hints;  // when nothing fits: what would make a plan fit (ztune search --explain)
  /// A best plan above kTightMemoryFraction of its GPUs' memory: the best one
  /// with a 5 % margin (tight_memory_alternative, as `ztune search` says it).
  std::optional<HeadroomAlternative> tight_memory;
  /// Cancel came after the search had finished, while it was being explained
  /// (after_search_work's words): the search stands, that work is not shown.
  QString cancelled_while;
  /// The cost model's error against the published runs of the cluster's GPU
  /// and the engine (ztune validate), computed on the worker thread: the
  /// validation suite takes ~0.1 s, too long for the UI thread.
  Accuracy accuracy;
};

/// The best plan the search finds for exactly `gpus` devices.
struct ScalingPoint {
  quint64 tag = 0;           // which request it answers
  int gpus = 0;
  bool feasible = false;     // some plan fits at this count
  double tokens_per_s = 0;
  double mfu = 0;
  double tflops_per_gpu = 0;
  QString plan;              // the best plan's summary
};

/// One simulated iteration of one plan.
struct SimulationOutcome {
  quint64 tag = 0;             // which request it answers
  Plan plan;
  TimelineData timeline;
  TimePrediction time;         // the analytical prediction re-timed by the simulator
  std::size_t operations = 0;  // operations in the simulated graph
};

}  // namespace ztune::gui

Q_DECLARE_METATYPE(ztune::gui::SearchOutcome)
Q_DECLARE_METATYPE(ztune::gui::ScalingPoint)
Q_DECLARE_METATYPE(ztune::gui::SimulationOutcome)
