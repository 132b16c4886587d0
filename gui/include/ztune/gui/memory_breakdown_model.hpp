#pragma once
// GPU memory per category (prediction.hpp's MemLine) for one or more plans,
// plus what the chart draws around it: the GPU capacity line and the host and
// NVMe use per node.
#include <vector>

#include "ztune/gui/breakdown_model.hpp"
#include "ztune/model/prediction.hpp"

namespace ztune::gui {

class MemoryBreakdownModel : public BreakdownModel {
  Q_OBJECT
 public:
  explicit MemoryBreakdownModel(QObject* parent = nullptr);

  /// One column per plan, labelled.
  void set_memory(const QStringList& labels, const std::vector<MemoryPrediction>& memory);
  [[nodiscard]] const std::vector<MemoryPrediction>& memory() const { return memory_; }

 private:
  std::vector<MemoryPrediction> memory_;
};

}  // namespace ztune::gui
