#pragma once
// One iteration's time by part (prediction.hpp's TimePart) for one or more plans.
#include <vector>

#include "ztune/gui/breakdown_model.hpp"
#include "ztune/model/prediction.hpp"

namespace ztune::gui {

class TimeBreakdownModel : public BreakdownModel {
  Q_OBJECT
 public:
  explicit TimeBreakdownModel(QObject* parent = nullptr);

  void set_times(const QStringList& labels, const std::vector<TimePrediction>& times);
  [[nodiscard]] const std::vector<TimePrediction>& times() const { return times_; }

 private:
  std::vector<TimePrediction> times_;
};

}  // namespace ztune::gui
